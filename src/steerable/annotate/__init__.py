"""The annotation engine: modules (see `registry.MODULES`) run per episode, staged, validated, written.

Entry point: `steerable.annotate.run.annotate(AnnotateConfig(...))`; modules live in `modules/<name>/`.
"""
