"""`steerable view --export DIR`: the viewer as a static site that opens from disk with no server.

Chromium neither fetches JSON nor loads ES modules from file://, so the data is written as classic
scripts that fill `window.STEERABLE_EXPORT` (`data/dataset.js`, one `data/episode_NNNNNN.js` per
episode, loaded on demand), and each episode's video is cut into its own H.264 clip whose time 0 is
the episode's first frame (`videos/CAMERA/episode_NNNNNN.mp4`). Recipe samples are rendered for every
frame ahead of time and stored deduplicated.

The clips are all queued on a `ClipPool` (one clip per two cores) before the first episode's data is
computed, so re-encoding runs in parallel with itself and with the data scripts; an episode's script
is written once its clips are done, and `progress(1)` is called per episode written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from steerable.dataset import EpisodeMeta, LeRobotDataset, open_dataset
from steerable.dataset.atomic import atomic_write_bytes
from steerable.dataset.commit import commit_folder
from steerable.errors import ConfigError, SteerableError, VideoNotFoundError
from steerable.viewer.assets import ASSET_NAMES, asset_bytes, index_html
from steerable.viewer.clips import ClipPool
from steerable.viewer.site import ViewerData

__all__ = ["export_site"]

logger = logging.getLogger(__name__)


def _script(target: Path, expression: str, value: Any) -> None:
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    atomic_write_bytes(target, f"{expression} = {body};\n".encode(), durable=False)


def _check_out_dir(out: Path, root: Path) -> None:
    if out.resolve() == root or out.resolve().is_relative_to(root):
        raise ConfigError(f"--export {out} is inside the dataset; choose a folder outside {root}")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--export {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "data" / "dataset.js").is_file():
        raise ConfigError(f"--export {out} is not empty and holds no earlier export; choose a new folder")


def export_site(
    dataset_root: Path | str | LeRobotDataset,
    out_dir: Path | str,
    episodes: Sequence[int] | None = None,
    *,
    recipes: Sequence[str] | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Write the static viewer of a dataset (all episodes, or `episodes`) to `out_dir`; returns index.html.

    `workers` bounds the clips cut at once (default: one per two cores); `progress(n)` is told of each
    episode written.
    """
    ds = dataset_root if isinstance(dataset_root, LeRobotDataset) else open_dataset(dataset_root)
    out = Path(out_dir).expanduser()
    _check_out_dir(out, ds.root)
    data = ViewerData(ds, episodes=episodes, recipes=recipes)
    # Built beside `out` and switched in whole: a failed export (full disk...) leaves `out` as it was.
    with commit_folder(out, durable=False) as tx:
        _write_site(ds, data, tx.root, workers, progress or (lambda n: None))
    return out / "index.html"


def _clip_rel(camera: str, ep: EpisodeMeta) -> str:
    return f"videos/{camera}/episode_{ep.episode_index:06d}.mp4"


def _write_site(
    ds: LeRobotDataset, data: ViewerData, out: Path, workers: int | None, progress: Callable[[int], None]
) -> None:
    for folder in ("data", "assets"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    for name in ASSET_NAMES:
        atomic_write_bytes(out / "assets" / name, asset_bytes(name), durable=False)
    episodes = data.episodes()
    with ClipPool(len(episodes) * len(ds.camera_keys), workers) as pool:

        def queue(camera: str, ep: EpisodeMeta) -> Future[int] | SteerableError:
            try:
                src = ds.video_path(camera, ep)
                if not src.is_file():
                    raise VideoNotFoundError(f"video file {src.relative_to(ds.root)} is missing")
                start = ep.videos[camera].from_timestamp
            except SteerableError as exc:  # shown as the camera's note
                return exc
            return pool.submit(src, out / _clip_rel(camera, ep), start, start + ep.length / ds.fps, ds.fps)

        clips = {(camera, ep.episode_index): queue(camera, ep) for ep in episodes for camera in ds.camera_keys}

        def video_source(camera: str, ep: EpisodeMeta) -> tuple[str, float]:
            clip = clips[(camera, ep.episode_index)]
            if isinstance(clip, SteerableError):
                raise clip
            clip.result()  # waits for this clip; a failed cut is the camera's note
            return _clip_rel(camera, ep), 0.0

        summary = data.summary()
        usable = [r["name"] for r in summary["recipes"] if r["error"] is None]
        for ep in episodes:
            payload = dict(data.episode(ep.episode_index, video_source))
            payload["renders"] = {name: data.recipes.episode(name, ep.episode_index) for name in usable}
            _script(
                out / "data" / f"episode_{ep.episode_index:06d}.js",
                f"window.STEERABLE_EXPORT.episodes[{ep.episode_index}]",
                payload,
            )
            logger.info("exported episode %d", ep.episode_index)
            progress(1)
    _script(out / "data" / "dataset.js", "window.STEERABLE_EXPORT", {"dataset": summary, "episodes": {}})
    atomic_write_bytes(out / "index.html", index_html(("data/dataset.js",)).encode(), durable=False)
