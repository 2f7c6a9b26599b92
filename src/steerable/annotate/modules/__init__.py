"""The annotation modules (plan, interjections, vqa), one package each."""
