"""Privileged environment state: the fixed-layout vector, `make-dataset --privileged_state`, and the
default dataset unchanged by it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from steerable.dataset import open_dataset
from steerable.dataset.frames import feature_matrix
from steerable.synthetic import generate_synthetic, simulate_episode
from steerable.synthetic.privileged import (
    ENVIRONMENT_STATE_FEATURE,
    ENVIRONMENT_STATE_NAMES,
    environment_state,
)
from steerable.synthetic.world import (
    CUBE_COLORS,
    CUBE_SIZE,
    HOME,
    RECEPTACLE_COLORS,
    Cube,
    Gripper,
    Receptacle,
    Scene,
    WorldState,
    step,
)

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
# sha256 (first 16 hex digits) of the default dataset's frames and info.json (2 episodes, seed 3,
# wrist camera, oracle language), as generated before --privileged_state existed. info.json re-pinned
# when steerable's provenance block left it for meta/steerable_provenance.json (#34: that key and
# nothing else went; the frames kept their bytes).
PINNED_DEFAULT = {"data/chunk-000/file-000.parquet": "000a3e6fc9e57799", "meta/info.json": "a1a01ed1c53a3169"}


def _world() -> WorldState:
    scene = Scene(
        (Cube("green cube", CUBE_COLORS["green"]), Cube("cyan cube", CUBE_COLORS["cyan"])),
        (Receptacle("grey bin", RECEPTACLE_COLORS["grey bin"], "bin", (0.02, 0.14, 0.14, 0.26)),),
    )
    return WorldState(scene, HOME, ((0.30, 0.10, 0.0), (0.45, 0.32, 0.0)))


def _slot(name: str) -> int:
    return ENVIRONMENT_STATE_NAMES.index(name)


def test_layout_is_one_slot_per_palette_object() -> None:
    assert len(ENVIRONMENT_STATE_NAMES) == 4 * len(CUBE_COLORS) + 3 * len(RECEPTACLE_COLORS) == 39
    assert ENVIRONMENT_STATE_NAMES[:5] == ("red_cube.x", "red_cube.y", "red_cube.z", "red_cube.present",
                                           "green_cube.x")
    assert ENVIRONMENT_STATE_NAMES[24:27] == ("blue_bin.x", "blue_bin.y", "blue_bin.present")
    assert ENVIRONMENT_STATE_NAMES[-3:] == ("right_zone.x", "right_zone.y", "right_zone.present")
    assert len(set(ENVIRONMENT_STATE_NAMES)) == len(ENVIRONMENT_STATE_NAMES)


def test_present_objects_fill_their_slots_and_absent_ones_are_zero() -> None:
    vec = environment_state(_world())
    assert vec.dtype == np.float32 and vec.shape == (39,)
    at = _slot("green_cube.x")
    assert vec[at: at + 4].tolist() == pytest.approx([0.30, 0.10, 0.0, 1.0])
    at = _slot("cyan_cube.x")
    assert vec[at: at + 4].tolist() == pytest.approx([0.45, 0.32, 0.0, 1.0])
    at = _slot("grey_bin.x")
    assert vec[at: at + 3].tolist() == pytest.approx([0.08, 0.20, 1.0])
    filled = {_slot(f"{o}.{f}") for o, fields in (("green_cube", "xyz"), ("cyan_cube", "xyz"), ("grey_bin", "xy"))
              for f in [*fields, "present"]}
    assert all(vec[i] == 0.0 for i in range(len(vec)) if i not in filled)
    # Positions do not depend on the order of the scene's cubes.
    world = _world()
    swapped = WorldState(Scene(world.scene.cubes[::-1], world.scene.receptacles), HOME, world.positions[::-1])
    assert np.array_equal(environment_state(swapped), vec)


def test_the_vector_is_each_world_s_own_when_scenes_alternate() -> None:
    """The layout of the last scene is kept between calls (a simulator asks every step): a call on another
    scene, and back, gives each scene's own vector, and a returned vector is not shared with the next."""
    world = _world()
    other = WorldState(Scene(world.scene.cubes[:1], ()), HOME, world.positions[:1])
    first = environment_state(world)
    first_again = environment_state(world)
    assert first is not first_again and np.array_equal(first, first_again)
    first_again[:] = 7.0
    lone = environment_state(other)
    assert lone[_slot("grey_bin.present")] == 0.0 and lone[_slot("cyan_cube.present")] == 0.0
    assert lone[_slot("green_cube.present")] == 1.0
    assert np.array_equal(environment_state(world), first)


def test_a_held_cube_keeps_its_live_position() -> None:
    world = _world()
    for pose in (Gripper(0.30, 0.10, 0.15, 0.0), Gripper(0.30, 0.10, 0.02, 0.0), Gripper(0.30, 0.10, 0.02, 1.0)):
        world = step(world, pose)  # from above, so the fingers do not push it
    assert world.held == 0
    for pose in (Gripper(0.30, 0.10, 0.12, 1.0), Gripper(0.20, 0.25, 0.12, 1.0)):
        world = step(world, pose)
        at = _slot("green_cube.x")
        vec = environment_state(world)
        assert vec[at: at + 4].tolist() == pytest.approx([pose.x, pose.y, pose.z - CUBE_SIZE / 2, 1.0])


def _make(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "steerable.cli.main", "make-dataset", "synthetic", "--out", str(out), "--episodes",
           "2", "--seed", "3", "--cameras", "wrist", "--difficulty", "easy", "--with_language", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)


def test_make_dataset_privileged_state_writes_the_feature(tmp_path: Path) -> None:
    result = _make(tmp_path / "priv", "--privileged_state")
    assert result.returncode == 0, result.stderr
    assert "with privileged state" in result.stdout
    info = json.loads((tmp_path / "priv" / "meta" / "info.json").read_text())
    feature = info["features"][ENVIRONMENT_STATE_FEATURE]
    assert feature == {"dtype": "float32", "shape": [39], "names": list(ENVIRONMENT_STATE_NAMES)}
    ds = open_dataset(tmp_path / "priv")
    table = ds.read_episode(1, [ENVIRONMENT_STATE_FEATURE, "observation.state"])
    stored = feature_matrix(table, ENVIRONMENT_STATE_FEATURE)
    _task, demo = simulate_episode(3, 1, 15, "easy", 0.3)
    want = np.stack([environment_state(s) for s in demo.states])
    assert stored.dtype == np.float32 and np.array_equal(stored, want)
    assert (stored[:, 3::4][:, :6].sum(1) >= 3).all()  # 3-4 cubes present on every frame


def test_default_dataset_is_unchanged(tmp_path: Path) -> None:
    # `--camera_shapes legacy`: the bytes written before both cameras had one shape (the wrist 128x128).
    result = _make(tmp_path / "plain", "--camera_shapes", "legacy")
    assert result.returncode == 0, result.stderr
    root = tmp_path / "plain"
    got = {name: hashlib.sha256((root / name).read_bytes()).hexdigest()[:16] for name in PINNED_DEFAULT}
    assert got == PINNED_DEFAULT
    assert ENVIRONMENT_STATE_FEATURE not in json.loads((root / "meta" / "info.json").read_text())["features"]
    # The default shapes change the wrist frames only, never the data.
    assert _make(tmp_path / "equal").returncode == 0
    data = "data/chunk-000/file-000.parquet"
    assert hashlib.sha256((tmp_path / "equal" / data).read_bytes()).hexdigest()[:16] == PINNED_DEFAULT[data]
    info = json.loads((tmp_path / "equal" / "meta" / "info.json").read_text())
    assert info["features"]["observation.images.wrist"]["shape"] == [160, 224, 3]


def test_library_default_has_no_environment_state(tmp_path: Path) -> None:
    root = generate_synthetic(tmp_path / "lib", episodes=1, cameras=("wrist",), difficulty="easy")
    assert ENVIRONMENT_STATE_FEATURE not in open_dataset(root).features
