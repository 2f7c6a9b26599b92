"""The simulator's frames and boxes stay byte for byte what they were when the digests were pinned.

Datasets and their pinned hashes depend on every pixel, so any change to `synthetic/render.py`
(speed-ups included) must leave these digests alone. The worlds: episodes of several seeds at
each difficulty (cubes held, stacked, pushed, released), plus hand-made corners (the gripper off
the table, at the table, a stack taller than the wrist camera), rendered by both cameras at both
camera shapes and at an odd size.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace

import numpy as np
import pytest

import steerable.synthetic.render as render
from steerable.synthetic import simulate_episode
from steerable.synthetic.world import CUBE_SIZE, Gripper, WorldState, sample_world

EVERY = 4  # the n-th state of each episode
EPISODES = [(seed, difficulty) for difficulty in ("easy", "realistic", "hard") for seed in (0, 3, 11)]
ODD: render.CameraSize = (97, 61)


def _corner_states() -> list[WorldState]:
    base = sample_world(np.random.default_rng(5))
    (x, y, _), *rest = base.positions
    stacked = replace(  # three cubes on top of one another: the top one rises above a low wrist camera
        base,
        positions=((x, y, 0.0), (x, y, CUBE_SIZE), (x, y, 2 * CUBE_SIZE), *rest[2:]),
    )
    states = [
        replace(stacked, gripper=Gripper(x + 0.03, y, 0.0, 0.2)),
        replace(stacked, gripper=Gripper(x, y, 0.13, 0.0)),
        replace(base, gripper=Gripper(x, y, 0.02, 1.0), positions=((x, y, 0.0), *rest), held=0),
    ]
    for gx, gy, gz in ((-0.05, -0.05, 0.25), (0.61, 0.45, 0.0), (0.0, 0.2, 0.05), (0.28, 0.45, 0.25)):
        states.append(replace(base, gripper=Gripper(gx, gy, gz, 0.5)))
    return states


def _states() -> list[WorldState]:
    states = _corner_states()
    for seed, difficulty in EPISODES:
        _, demo = simulate_episode(seed, seed, 15, difficulty)
        states.extend(demo.states[::EVERY])
    return states


# (camera, sizes) -> sha256 over every frame's bytes and boxes, from the renderer as it was pinned.
# ("wrist", "odd") was re-pinned when edges on a half pixel began to round up whatever their last
# bits: it had differed between machines; the default sizes kept their bytes.
PINNED = {
    ("top", "equal"): "f8f7bb42a4423985923690783d59cc9d341c9c6543360d43af1cb1ea1d543e43",
    ("wrist", "equal"): "39d605a6172b7b07a0b76bed3884d1b79c31d9ed9fcfd0169e35be1663b1d9d4",
    ("top", "legacy"): "f8f7bb42a4423985923690783d59cc9d341c9c6543360d43af1cb1ea1d543e43",
    ("wrist", "legacy"): "9bbf7868e7411ea45644bca9aa1b93ed1549617201ec192052421b3192d845ea",
    ("top", "odd"): "f2ca4eee1daaa7a5fe6e5e3108e6ddce1ffef1faeda9bca11c84c3800b2eda8a",
    ("wrist", "odd"): "d1b8f433d0c629e55f51ac8b266d733b219880a6f0e8da985a5dfe86c3968311",
}


def _size(camera: str, shapes: str) -> render.CameraSize:
    return ODD if shapes == "odd" else render.camera_sizes(shapes)[camera]


@pytest.fixture(scope="module")
def states() -> list[WorldState]:
    return _states()


def _digest(states: list[WorldState], camera: str, size: render.CameraSize) -> str:
    h = hashlib.sha256()
    for state in states:
        img = render.render_frame(state, camera, size)
        assert img.shape == (size[1], size[0], 3) and img.dtype.name == "uint8" and img.flags.c_contiguous
        h.update(img.tobytes())
        h.update(json.dumps(render.object_boxes(state, camera, size)).encode())
    return h.hexdigest()


@pytest.mark.parametrize(("camera", "shapes"), list(PINNED))
def test_frames_and_boxes_are_byte_identical_to_the_pinned_renderer(
    states: list[WorldState], camera: str, shapes: str
) -> None:
    size = _size(camera, shapes)
    assert len(states) > 200
    assert any(s.held is not None for s in states) and any(s.positions[1][2] > 0 for s in states)
    assert _digest(states, camera, size) == PINNED[(camera, shapes)]


@pytest.mark.parametrize("direction", [1, -1])
def test_the_last_bit_of_a_state_changes_no_pixel(states: list[WorldState], direction: int) -> None:
    # Positions can differ in their last bits from one machine to another; a held cube's
    # edges land on half pixels of an odd-sized wrist image, and a camera over the table's edge
    # centres a pixel on it: neither may move a pixel, or a dataset's bytes depend on the machine.
    def nudge(v: float) -> float:
        return math.nextafter(v, direction * math.inf) if v else v

    nudged = [
        replace(
            s,
            gripper=replace(s.gripper, x=nudge(s.gripper.x), y=nudge(s.gripper.y), z=nudge(s.gripper.z)),
            positions=tuple((nudge(x), nudge(y), nudge(z)) for x, y, z in s.positions),
        )
        for s in states
    ]
    for camera, shapes in (("wrist", "odd"), ("top", "odd"), ("wrist", "equal")):
        assert _digest(nudged, camera, _size(camera, shapes)) == PINNED[(camera, shapes)], (camera, shapes)


def test_a_frame_is_a_fresh_array_each_call(states: list[WorldState]) -> None:
    first = render.render_frame(states[0], "top")
    first[:] = 0
    assert render.render_frame(states[0], "top").any(), "drawing on a returned frame must not touch the next one"
    wrist = render.render_frame(states[0], "wrist")
    wrist[:] = 0
    assert render.render_frame(states[0], "wrist").any()


def test_the_fast_table_grain_takes_the_shades_of_the_direct_sines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the pinned worlds: random wrist poses (on and off the table, every height), each frame
    as drawn and with every row computed by the direct sines (a margin wider than any shade)."""
    rng = np.random.default_rng(0)
    base = sample_world(rng)
    poses = [
        replace(base, gripper=Gripper(*rng.uniform((-0.05, -0.05, 0.0, 0.0), (0.61, 0.45, 0.25, 1.0))))
        for _ in range(150)
    ]
    sizes = [render.camera_sizes("equal")["wrist"], render.camera_sizes("legacy")["wrist"], ODD]
    fast = [render.render_frame(s, "wrist", sizes[i % 3]) for i, s in enumerate(poses)]
    monkeypatch.setattr(render, "_STEP_MARGIN", 1.0)
    for i, (state, frame) in enumerate(zip(poses, fast, strict=True)):
        np.testing.assert_array_equal(frame, render.render_frame(state, "wrist", sizes[i % 3]))
