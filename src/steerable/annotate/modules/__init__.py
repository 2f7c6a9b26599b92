"""The annotation modules, one folder each: plan, interjections, vqa, motion (see `annotate/registry.py`).

A module folder's `__init__` imports only its settings and stage (so `steerable annotate --help`
stays cheap); the rest of its public names load on first use (`steerable.lazy.lazy_exports`).
"""
