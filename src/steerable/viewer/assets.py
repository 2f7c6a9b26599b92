"""The front-end files shipped as package data (`steerable/viewer/static/`): no CDN, no remote fonts."""

from __future__ import annotations

from importlib import resources

__all__ = ["ASSET_NAMES", "DATA_PLACEHOLDER", "asset_bytes", "index_html"]

ASSET_NAMES = ("app.js", "edit.js", "plot.js", "sample.js", "style.css")
DATA_PLACEHOLDER = "<!--STEERABLE-DATA-->"


def asset_bytes(name: str) -> bytes:
    """One asset file's bytes; only the names in `ASSET_NAMES`."""
    if name not in ASSET_NAMES:
        raise KeyError(name)
    return (resources.files("steerable.viewer") / "static" / name).read_bytes()


def index_html(data_scripts: tuple[str, ...] = ()) -> str:
    """The app page; `data_scripts` (relative URLs) load before the app (the static export's data)."""
    page = (resources.files("steerable.viewer") / "static" / "index.html").read_text(encoding="utf-8")
    tags = "\n".join(f'<script src="{src}"></script>' for src in data_scripts)
    return page.replace(DATA_PLACEHOLDER, tags)
