"""Where the recordings go: an `.rrd` file, a running viewer (gRPC URL), or a viewer spawned here."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Literal
from urllib.parse import urlsplit

from steerable.dataset import LeRobotDataset
from steerable.dataset.atomic import atomic_path
from steerable.errors import ConfigError, MissingExtraError, WriteError
from steerable.viewer.rerun.episode import EpisodeLog, VideoMode, log_episode, plot_features
from steerable.viewer.rerun.layout import episode_blueprint

__all__ = [
    "RerunTarget",
    "check_can_spawn",
    "check_reachable",
    "import_rerun",
    "log_dataset",
    "parse_target",
    "recording_id",
    "rerun_executable",
]

logger = logging.getLogger(__name__)

_URL_SCHEMES = ("rerun://", "rerun+http://", "rerun+https://")
_DEFAULT_PORT = 9876  # where a spawned viewer listens


def import_rerun() -> ModuleType:
    """The rerun SDK, or a one-line error naming the extra that installs it."""
    try:
        import rerun
    except ImportError:
        raise MissingExtraError("rerun-sdk", "rerun") from None
    return rerun


@dataclass(frozen=True)
class RerunTarget:
    """`file` (write an .rrd), `connect` (a running viewer's gRPC URL) or `spawn` (start a viewer)."""

    kind: Literal["file", "connect", "spawn"]
    where: str | None = None


def parse_target(text: str | None) -> RerunTarget:
    """The value of `--rerun`: empty/None spawns a viewer, a URL connects, a `.rrd` path is written."""
    if text is None or not text.strip():
        return RerunTarget("spawn")
    text = text.strip()
    if text.startswith(_URL_SCHEMES):
        return RerunTarget("connect", text)
    if not text.endswith(".rrd"):
        raise ConfigError(
            f"--rerun takes a FILE.rrd to write, a viewer URL (rerun+http://HOST:9876/proxy), or nothing "
            f"(spawn a viewer), got {text!r}"
        )
    parent = Path(text).expanduser().resolve().parent
    if not parent.is_dir():
        raise ConfigError(f"--rerun {text}: folder {parent} does not exist")
    return RerunTarget("file", str(Path(text).expanduser().resolve()))


def check_reachable(url: str, timeout_s: float = 3.0) -> None:
    """A one-line error now, instead of the SDK's retries, when no viewer listens at `url`."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 9876
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ConfigError(
            f"no Rerun viewer answers at {url} ({exc.strerror or exc}): start one (`rerun`, or `rerun --serve-grpc`) "
            f"or write a file with --rerun FILE.rrd"
        ) from None


def recording_id(episode_index: int) -> str:
    return f"episode_{episode_index:06d}"


def log_dataset(
    ds: LeRobotDataset,
    episodes: Sequence[int],
    target: RerunTarget,
    *,
    video: VideoMode = "asset",
    application_id: str | None = None,
) -> list[EpisodeLog]:
    """Log each episode as its own recording (id `episode_NNNNNN`) to `target`; returns what was logged."""
    rr = import_rerun()
    metas = [ds.episode(i) for i in episodes]  # unknown episodes fail before anything is written
    app = application_id or f"steerable {ds.root.name}"
    blueprint = episode_blueprint(ds.camera_keys, plot_features(ds), fps=ds.fps)
    if target.kind == "connect" and target.where is not None:
        check_reachable(target.where)
    logs: list[EpisodeLog] = []
    with tempfile.TemporaryDirectory(prefix="steerable-rerun-") as scratch_dir:
        scratch = Path(scratch_dir)
        parts: list[Path] = []
        for ep in metas:
            rec = rr.RecordingStream(app, recording_id=recording_id(ep.episode_index))
            rec.set_log_time_enabled(False)  # the dataset's own timelines only
            if target.kind == "file":
                parts.append(scratch / f"{recording_id(ep.episode_index)}.rrd")
                rec.save(parts[-1], default_blueprint=blueprint)
            elif target.kind == "connect":
                rec.connect_grpc(target.where, default_blueprint=blueprint)
            else:
                _spawn(rr, rec, blueprint)
            rec.send_recording_name(f"{ds.root.name} episode {ep.episode_index}")
            try:
                logs.append(log_episode(rr, rec, ds, ep, video=video, scratch=scratch))
                rec.flush()
            except RuntimeError as exc:  # the SDK's sink errors (a viewer that went away, or never came)
                hint = " (did the viewer start? it needs a display)" if target.kind == "spawn" else ""
                raise ConfigError(f"Rerun: {exc}{hint}; write a file with --rerun FILE.rrd") from None
            finally:
                rec.disconnect()
        if target.kind == "file" and target.where is not None:
            _write(parts, Path(target.where))
    return logs


def check_can_spawn(instead: str) -> None:
    """Spawning a viewer needs a display, or a viewer already on the default port (spawn joins it).

    Without either, the SDK's viewer dies and the logger retries for seconds: one line now instead.
    """
    if not sys.platform.startswith("linux") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    try:
        with socket.create_connection(("127.0.0.1", _DEFAULT_PORT), timeout=0.5):
            return
    except OSError:
        pass
    raise ConfigError(f"spawning the Rerun viewer needs a display (DISPLAY and WAYLAND_DISPLAY are not set): {instead}")


def _spawn(rr: ModuleType, rec: object, blueprint: object) -> None:
    """Start the native viewer shipped with the SDK (or connect to the one already on its port)."""
    check_can_spawn("write a file with --rerun FILE.rrd, or send to a viewer with --rerun rerun+http://HOST:9876/proxy")
    try:
        rr.sinks.spawn(executable_path=rerun_executable(), default_blueprint=blueprint, recording=rec)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"could not start the Rerun viewer ({first}); write a file with --rerun FILE.rrd") from None


def rerun_executable() -> str:
    """The `rerun` executable that ships with the SDK (for `rerun rrd merge`)."""
    try:
        import rerun_cli

        shipped = Path(rerun_cli.__file__).parent / "rerun"
        if shipped.is_file():
            return str(shipped)
    except ImportError:
        pass
    found = shutil.which("rerun") or str(Path(sys.executable).parent / "rerun")
    return found


def _write(parts: list[Path], dst: Path) -> None:
    """One part: copy it into place. Several: `rerun rrd merge` them (each stays its own recording)."""
    with atomic_path(dst) as tmp:
        if len(parts) == 1:
            shutil.copyfile(parts[0], tmp)
        else:
            done = subprocess.run(
                [rerun_executable(), "rrd", "merge", *map(str, parts), "-o", str(tmp)],
                capture_output=True, text=True, timeout=600,
            )
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise WriteError(f"could not merge the episode recordings into {dst}: {tail}")
