"""`steerable run --display rerun`: stream the running robot to a Rerun viewer (or an .rrd file).

Attached to a `Runtime` through its two hooks (no change to the loop): every tick's observation and
action (`frame_hooks`) and every event (`listeners`). Timelines: `frame_index` (control ticks) and
`time` (the loop's seconds). Entities:

- `cameras/<name>`: the camera frames as images (rendered by the simulator for this display);
- `plots/state`, `plots/action`: one named scalar series per dimension;
- `language/task|subtask|plan|memory`: the live context as `TextDocument` + `StateChange`;
- `language/interjection|speech|answer|tool`: `TextLog` at the tick they happened;
- `runtime/log`: mode changes, completion, warnings; `runtime/rates/*`: measured loop rates (Hz)
  and the action-queue length, once per second of loop time.

`rerun-sdk` is the `[rerun]` extra, imported when the display is created.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np

from steerable.errors import ConfigError, MissingExtraError
from steerable.language.styles import CONTEXT_STYLES

if TYPE_CHECKING:
    from steerable.control import Observation
    from steerable.runtime.loop import Runtime, RuntimeEvent

__all__ = ["RerunDisplay", "runtime_blueprint"]

logger = logging.getLogger(__name__)

FRAME_TIMELINE = "frame_index"
TIME_TIMELINE = "time"
_CONTEXT = ("task", *CONTEXT_STYLES)
_LOGS = {"interjection": (230, 120, 40), "speech": (60, 150, 230), "answer": (150, 90, 210), "tool": (120, 120, 120)}
_RUNTIME_LEVELS = {"warn": "WARN", "mode": "INFO", "done": "INFO", "info": "INFO"}
_URL_SCHEMES = ("rerun://", "rerun+http://", "rerun+https://")


def _camera_name(key: str) -> str:
    return key.removeprefix("observation.images.").removeprefix("observation.") or key


def _check_reachable(url: str) -> None:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 9876), timeout=3.0):
            pass
    except OSError as exc:
        raise ConfigError(
            f"no Rerun viewer answers at {url} ({exc.strerror or exc}): start one (`rerun`, or `rerun --serve-grpc`)"
            f" or write a file with --display_to FILE.rrd"
        ) from None


def _check_can_spawn() -> None:
    """A display, or a viewer already on the default port (spawn joins it); else one line now."""
    if not sys.platform.startswith("linux") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    try:
        with socket.create_connection(("127.0.0.1", 9876), timeout=0.5):
            return
    except OSError:
        pass
    raise ConfigError(
        "spawning the Rerun viewer needs a display (DISPLAY and WAYLAND_DISPLAY are not set): write a file "
        "with --display_to FILE.rrd, or send to a viewer with --display_to rerun+http://HOST:9876/proxy"
    )


def _spawn(rr: Any, rec: Any) -> None:
    """Start the native viewer that ships with the SDK (or connect to the one already on its port)."""
    _check_can_spawn()
    try:
        import rerun_cli

        executable: str | None = str(Path(rerun_cli.__file__).parent / "rerun")
    except ImportError:
        executable = None  # the SDK looks for `rerun` on PATH
    try:
        rr.sinks.spawn(executable_path=executable, recording=rec)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"could not start the Rerun viewer ({first}); use --display_to FILE.rrd") from None


def runtime_blueprint(cameras: list[str], fps: float) -> Any:
    """Cameras on top; the live language context, the event log and the plots below."""
    import rerun.blueprint as rrb

    rows: list[Any] = []
    if cameras:
        rows.append(rrb.Horizontal(*[
            rrb.Spatial2DView(origin=f"cameras/{_camera_name(c)}", name=_camera_name(c)) for c in cameras
        ]))
    text = rrb.Vertical(*[rrb.TextDocumentView(origin=f"language/{k}", name=k) for k in _CONTEXT])
    logs = rrb.Vertical(
        rrb.StateTimelineView(origin="language", contents=["language/subtask", "language/memory"],
                              name="language over time"),
        rrb.TextLogView(origin="/", contents=["language/**", "runtime/log"], name="events"),
    )
    rows.append(rrb.Horizontal(text, logs, column_shares=[2, 3]))
    rows.append(rrb.Horizontal(
        rrb.TimeSeriesView(origin="plots/state", name="state"),
        rrb.TimeSeriesView(origin="plots/action", name="action"),
        rrb.TimeSeriesView(origin="runtime/rates", name="loop rates (Hz) and queue"),
    ))
    return rrb.Blueprint(
        rrb.Vertical(*rows, row_shares=([3.0] if cameras else []) + [2.5, 1.5]),
        rrb.BlueprintPanel(state="collapsed"),
        rrb.SelectionPanel(state="collapsed"),
        rrb.TimePanel(state="expanded", timeline=FRAME_TIMELINE, fps=fps),
    )


class RerunDisplay:
    """Streams one runtime to Rerun. `target`: None spawns a viewer, a URL connects, a `.rrd` is written."""

    def __init__(self, target: str | None = None, *, application_id: str = "steerable run") -> None:
        try:
            import rerun as rr
        except ImportError:
            raise MissingExtraError("rerun-sdk", "rerun") from None
        self.rr = rr
        self.rec = rr.RecordingStream(application_id)
        self.rec.set_log_time_enabled(False)
        if target is None or not target.strip():
            _spawn(rr, self.rec)
        elif target.startswith(_URL_SCHEMES):
            _check_reachable(target)
            self.rec.connect_grpc(target)
        elif target.endswith(".rrd"):
            if not Path(target).expanduser().resolve().parent.is_dir():
                raise ConfigError(f"--display_to {target}: its folder does not exist")
            self.rec.save(Path(target).expanduser())
        else:
            raise ConfigError(
                f"--display_to takes a viewer URL (rerun+http://HOST:9876/proxy) or a FILE.rrd, got {target!r}"
            )
        self.runtime: Runtime | None = None
        self._named = False
        self._next_rates = 1.0  # rates are measured over at least one second of loop time

    def attach(self, runtime: Runtime) -> None:
        """Subscribe to `runtime`'s events and frames (and make the simulator render its cameras)."""
        self.runtime = runtime
        runtime.render = True
        cameras = list(getattr(runtime.env, "camera_keys", ()))
        self.rr.send_blueprint(runtime_blueprint(cameras, runtime.rates.ctrl_hz), recording=self.rec)
        runtime.listeners.append(self.on_event)
        runtime.frame_hooks.append(self.on_frame)

    def _at(self, frame: int, time_s: float) -> None:
        self.rec.set_time(FRAME_TIMELINE, sequence=int(frame))
        self.rec.set_time(TIME_TIMELINE, duration=float(time_s))

    def on_event(self, event: RuntimeEvent) -> None:
        rr = self.rr
        self._at(event.frame, event.time_s)
        if event.kind in _CONTEXT:
            text = event.text or ""
            # A cleared value logs an empty state (the lane ends); `state=None` would log nothing at all.
            state = rr.StateChange(state=text) if text else rr.StateChange.from_fields(clear_unset=True)
            self.rec.log(f"language/{event.kind}", rr.TextDocument(text), state)
        elif event.kind in _LOGS:
            self.rec.log(f"language/{event.kind}", rr.TextLog(event.text, color=_LOGS[event.kind]))
        else:
            level = _RUNTIME_LEVELS.get(event.kind, "INFO")
            self.rec.log("runtime/log", rr.TextLog(f"{event.kind}: {event.text}", level=level))

    def on_frame(self, obs: Observation, action: np.ndarray) -> None:
        rr = self.rr
        frame = self.runtime.frame if self.runtime is not None else 0
        self._at(frame, obs.time_s)
        if not self._named:
            names = list(obs.state_names) or [str(i) for i in range(len(obs.state))]
            self.rec.log("plots/state", rr.SeriesLines(names=names), static=True)
            self.rec.log("plots/action", rr.SeriesLines(names=names[: len(action)]), static=True)
            self._named = True
        for key, image in obs.images.items():
            self.rec.log(f"cameras/{_camera_name(key)}", rr.Image(image))
        self.rec.log("plots/state", rr.Scalars(np.asarray(obs.state, dtype=np.float64)))
        self.rec.log("plots/action", rr.Scalars(np.asarray(action, dtype=np.float64)))
        if self.runtime is not None and obs.time_s >= self._next_rates:
            self._next_rates = obs.time_s + 1.0
            for name, value in self.runtime.measured_rates().items():
                self.rec.log(f"runtime/rates/{name}", rr.Scalars(value))
            self.rec.log("runtime/rates/queue", rr.Scalars(float(len(self.runtime.state.queue))))

    def close(self) -> None:
        """Send what is buffered and finish the file or stream."""
        try:
            self.rec.flush()
        except RuntimeError as exc:  # the viewer went away: the session itself is done, say so and go on
            logger.warning("rerun display: %s", exc)
        finally:
            self.rec.disconnect()
