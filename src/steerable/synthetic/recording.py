"""What the recorder keeps of a demonstration: ticks, sensor readings and camera images.

At `easy` it keeps everything exactly (every tick, the reached pose, the rendered image). Above
it, like a real LeRobot recording: a stalled control loop loses a tick (the state jumps, the
timestamps stay `frame_index / fps`, so the file stays a valid v3 dataset), the state carries
sensor noise, a camera sometimes delivers its previous image again (a dropped frame), the top
camera shakes by a pixel or a few, the room lighting drifts and switches, and a person's hand
may pass over the table. At `hard` the gripper sensor also sticks at its last reading or drops out
to 0 for stretches (`true_closure` stays the real one). Boxes follow the image that is actually stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from steerable.synthetic.difficulty import Difficulty
from steerable.synthetic.expert import Demo
from steerable.synthetic.render import CAMERAS, CameraSize, camera_name, object_boxes, render_frame

__all__ = ["Recording", "record"]

_SKIN = np.array([224, 172, 140], dtype=np.uint8)
_SLEEVE = np.array([60, 90, 140], dtype=np.uint8)


@dataclass
class _CameraEffects:
    source: np.ndarray  # recorded frame -> recorded frame whose image is shown (dropped: an earlier one)
    shift: np.ndarray  # (n, 2) int pixel shift (dx, dy) of each recorded frame's image
    gain: np.ndarray  # (n,) brightness factor
    hand: list[tuple[float, float] | None] = field(default_factory=list)  # hand centre in pixels, or None


@dataclass
class Recording:
    """The stored episode: `ticks[k]` is the demo frame recorded as frame k."""

    demo: Demo
    ticks: np.ndarray
    state: np.ndarray  # (n, 4) float32 observation.state as the sensors read it
    action: np.ndarray  # (n, 4) float32
    true_closure: np.ndarray  # (n,) the gripper's real closure (for the true gripper events)
    cameras: dict[str, _CameraEffects] = field(default_factory=dict)
    sizes: dict[str, CameraSize] = field(default_factory=lambda: dict(CAMERAS))  # camera -> (width, height)

    def frame_of(self, tick: int) -> int:
        """The first recorded frame at or after demo frame `tick`."""
        return min(int(np.searchsorted(self.ticks, tick)), len(self.ticks) - 1)

    def frames(self, camera: str) -> Iterator[np.ndarray]:
        fx = self.cameras.get(camera_name(camera))
        cache: dict[int, np.ndarray] = {}
        for k in range(len(self.ticks)):
            if fx is None:
                yield render_frame(self.demo.states[int(self.ticks[k])], camera, self.sizes[camera_name(camera)])
                continue
            src = int(fx.source[k])
            if src not in cache:
                cache.clear()
                cache[src] = self._image(camera, fx, src)
            yield cache[src]

    def boxes(self, camera: str) -> list[list[dict[str, Any]]]:
        size = self.sizes[camera_name(camera)]
        fx = self.cameras.get(camera_name(camera))
        if fx is None:
            return [object_boxes(self.demo.states[int(t)], camera, size) for t in self.ticks]
        width, height = size
        out = []
        for k in range(len(self.ticks)):
            src = int(fx.source[k])
            dx, dy = (int(v) for v in fx.shift[src])
            shifted = []
            for b in object_boxes(self.demo.states[int(self.ticks[src])], camera, size):
                bx0, by0, bx1, by1 = (int(v) for v in b["box"])  # type: ignore[attr-defined]
                x0, x1 = max(bx0 + dx, 0), min(bx1 + dx, width)
                y0, y1 = max(by0 + dy, 0), min(by1 + dy, height)
                if x1 > x0 and y1 > y0:
                    shifted.append({"name": b["name"], "box": [x0, y0, x1, y1]})
            out.append(shifted)
        return out

    def _image(self, camera: str, fx: _CameraEffects, k: int) -> np.ndarray:
        img = render_frame(self.demo.states[int(self.ticks[k])], camera, self.sizes[camera_name(camera)])
        hand = fx.hand[k] if fx.hand else None
        if hand is not None:
            _draw_hand(img, hand)
        dx, dy = (int(v) for v in fx.shift[k])
        if dx or dy:
            img = _shift(img, dx, dy)
        if fx.gain[k] != 1.0:
            img = np.clip(np.arange(256) * fx.gain[k], 0, 255).astype(np.uint8)[img]
        return img


def record(
    demo: Demo,
    difficulty: Difficulty,
    rng: np.random.Generator,
    cameras: list[str],
    fps: int,
    sizes: dict[str, CameraSize] | None = None,
) -> Recording:
    """Record `demo` as a recorder at `difficulty` would (exactly, at `easy`); `sizes`: camera ->
    (width, height) of its images (default: `CAMERAS`)."""
    n = len(demo.states)
    true_obs = demo.observations()
    actions = demo.actions()
    sizes = {**CAMERAS, **(sizes or {})}
    if difficulty.is_easy:
        return Recording(demo, np.arange(n), true_obs, actions, true_obs[:, 3].copy(), sizes=sizes)
    ticks = np.arange(n)
    if difficulty.stall_rate > 0:
        lost = rng.random(n) < difficulty.stall_rate
        lost[0] = lost[-1] = False
        ticks = ticks[~lost]
    state = true_obs[ticks].astype(np.float64)
    xyz_std, closure_std = difficulty.state_noise
    state[:, :3] += rng.normal(0.0, xyz_std, size=(len(ticks), 3))
    state[:, 3] = np.clip(state[:, 3] + rng.normal(0.0, closure_std, size=len(ticks)), 0.0, 1.0)
    if difficulty.gripper_glitch_rate > 0:
        _gripper_glitches(state[:, 3], difficulty, rng, fps)
    rec = Recording(demo, ticks, state.astype(np.float32), actions[ticks], true_obs[ticks, 3].copy(), sizes=sizes)
    for cam in cameras:
        name = camera_name(cam)
        rec.cameras[name] = _camera_effects(name, len(ticks), difficulty, rng, fps, sizes[name])
    return rec


def _gripper_glitches(
    closure: np.ndarray, difficulty: Difficulty, rng: np.random.Generator, fps: int
) -> None:
    """In place: stretches where the reading sticks at its last value, or drops out to 0."""
    n = len(closure)
    for _ in range(int(rng.poisson(difficulty.gripper_glitch_rate))):
        length = max(1, int(rng.uniform(*difficulty.gripper_glitch_seconds) * fps))
        start = int(rng.integers(1, max(2, n - 1)))
        stuck = bool(rng.random() < 0.5)
        closure[start : start + length] = closure[start - 1] if stuck else 0.0


def _camera_effects(
    camera: str, n: int, difficulty: Difficulty, rng: np.random.Generator, fps: int, size: CameraSize
) -> _CameraEffects:
    source = np.arange(n)
    dropped = rng.random(n) < difficulty.dropped_frame_rate
    dropped[0] = False
    for k in np.flatnonzero(dropped):
        source[k] = source[k - 1]
    shift = np.zeros((n, 2), dtype=np.int64)
    if camera == "top" and difficulty.jitter_px > 0:
        walk = np.cumsum(rng.choice([-1, 0, 0, 0, 1], size=(n, 2)), axis=0)
        shift = np.clip(walk, -difficulty.jitter_px, difficulty.jitter_px)
    t = np.arange(n) / fps
    gain = np.ones(n)
    if difficulty.lighting > 0:
        period = float(rng.uniform(4.0, 10.0))
        gain += 0.5 * difficulty.lighting * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
        if rng.random() < 0.5:  # a light switched on or off part way
            gain[int(rng.integers(n)) :] += float(rng.choice([-1, 1])) * 0.5 * difficulty.lighting
    hand: list[tuple[float, float] | None] = []
    if camera == "top" and rng.random() < difficulty.distractor_rate:
        hand = _hand_path(n, rng, fps, size)
    return _CameraEffects(source, shift, gain, hand)


def _hand_path(n: int, rng: np.random.Generator, fps: int, size: CameraSize) -> list[tuple[float, float] | None]:
    """A hand reaching in from the bottom edge of the top image, lingering, and withdrawing."""
    width, height = size
    length = min(n, int(rng.uniform(1.5, 3.0) * fps))
    start = int(rng.integers(0, max(1, n - length)))
    x = float(rng.uniform(0.15, 0.85)) * width
    reach = float(rng.uniform(0.35, 0.6)) * height
    path: list[tuple[float, float] | None] = [None] * n
    for i in range(length):
        s = np.sin(np.pi * i / max(1, length - 1))  # in, then out
        path[start + i] = (x + 6.0 * np.sin(i / 4.0), height + 10 - s * (reach + 10))
    return path


def _draw_hand(img: np.ndarray, centre: tuple[float, float]) -> None:
    h, w = img.shape[:2]
    cx, cy = centre
    x0, x1 = int(max(cx - 11, 0)), int(min(cx + 11, w))
    y0, y1 = int(max(cy - 9, 0)), int(min(cy + 9, h))
    if x1 > x0 and y1 > y0:
        img[y0:y1, x0:x1] = _SKIN
    # The forearm reaches to the bottom edge.
    ax0, ax1 = int(max(cx - 8, 0)), int(min(cx + 8, w))
    ay0 = int(min(max(cy + 9, 0), h))
    if ax1 > ax0 and ay0 < h:
        img[ay0:h, ax0:ax1] = _SLEEVE


def _shift(img: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """`img` moved by (dx, dy) pixels, the uncovered border filled with the nearest edge pixels."""
    h, w = img.shape[:2]
    ys = np.clip(np.arange(h) - dy, 0, h - 1)
    xs = np.clip(np.arange(w) - dx, 0, w - 1)
    return np.take(np.take(img, ys, axis=0), xs, axis=1)
