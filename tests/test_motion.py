"""The no-model motion annotator: dims by name, keystates, primitives, heuristic subtasks, snapping."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from steerable.annotate.modules.motion import MotionConfig
from steerable.dataset import open_dataset
from steerable.dataset.frames import feature_matrix
from steerable.errors import ConfigError
from steerable.eval.metrics import boundary_mae, event_precision_recall, segmentation_f1, spans_from_starts
from steerable.motion import (
    DimSelection,
    Keystate,
    MotionParams,
    detect_keystates,
    find_dims,
    heuristic_subtasks,
    motion_rows,
    primitive_segments,
    snap_boundaries,
)
from steerable.synthetic import generate_synthetic, read_ground_truth

FPS = 15
EE_NAMES = ["ee.x", "ee.y", "ee.z", "gripper.pos"]
EE_FEATURES: dict[str, dict] = {
    "observation.state": {"dtype": "float32", "shape": [4], "names": EE_NAMES},
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
}
CLOSED_HIGH = MotionParams(gripper_closed_is_high=True)
# (seconds, ee target x/y/z, gripper 0 = open .. 1 = closed): reach left, descend, grasp, lift,
# carry forward, hold, descend, release, rise, hold.
PLAN = [
    (0.6, (0.30, 0.00, 0.15), 0.0),
    (1.2, (0.30, 0.15, 0.15), 0.0),
    (0.8, (0.30, 0.15, 0.02), 0.0),
    (0.4, (0.30, 0.15, 0.02), 1.0),
    (0.8, (0.30, 0.15, 0.15), 1.0),
    (1.2, (0.45, 0.15, 0.15), 1.0),
    (0.8, (0.45, 0.15, 0.15), 1.0),
    (0.8, (0.45, 0.15, 0.03), 1.0),
    (0.4, (0.45, 0.15, 0.03), 0.0),
    (0.8, (0.45, 0.15, 0.15), 0.0),
    (0.6, (0.45, 0.15, 0.15), 0.0),
]
# Frames where the gripper is half-way through closing and opening (end of segments 3 and 8, minus 3).
TRUE_CLOSE_S, TRUE_OPEN_S = 2.8, 6.73


def scripted(noise: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A smooth pick-and-place (minimum-jerk segments) with optional sensor noise."""
    rng = np.random.default_rng(seed)
    pose = np.array([0.30, 0.00, 0.15, 0.0])
    frames = []
    for seconds, xyz, grip in PLAN:
        target = np.array([*xyz, grip])
        s = np.arange(1, int(round(seconds * FPS)) + 1) / round(seconds * FPS)
        frames += [pose + (target - pose) * v for v in 10 * s**3 - 15 * s**4 + 6 * s**5]
        pose = target
    state = np.array(frames)
    state += rng.normal(0.0, 1.0, size=state.shape) * np.array([0.004, 0.004, 0.004, 0.03]) * noise
    return (np.arange(len(state)) / FPS).astype(np.float32), state.astype(np.float32)


def texts(rows: list[dict]) -> list[str]:
    return [r["content"] for r in rows]


def subtasks_of(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["style"] == "subtask"]


# --- dims -------------------------------------------------------------------------------------


def test_finds_cartesian_end_effector_and_gripper_by_name() -> None:
    dims = find_dims(EE_FEATURES, MotionParams())
    assert dims.state_key == "observation.state"
    assert dims.kind == "cartesian" and dims.axes == ["x", "y", "z"] and dims.position == [0, 1, 2]
    assert dims.gripper == [3]
    assert dims.grippers[0].closed_is_high is False  # position-like names: larger means more open
    closure = {"state": {"dtype": "float64", "shape": [2], "names": ["tcp.pos.x", "gripper_closedness"]}}
    assert find_dims(closure, MotionParams()).grippers[0].closed_is_high is True


def test_joint_arm_names_and_motor_dict_layout() -> None:
    names = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos", "gripper.pos"]
    features = {"action": {"dtype": "float32", "shape": [5], "names": {"motors": names}}}
    dims = find_dims(features, MotionParams())
    assert dims.state_key == "action"  # no state feature: the action is read instead
    assert dims.kind == "joint" and dims.gripper == [4] and dims.position == [0, 1, 2, 3]
    assert dims.groups == ["shoulder", "shoulder", "elbow", "wrist"]


def test_bimanual_grippers_and_stats_ranges() -> None:
    names = ["left_waist", "left_elbow", "left_gripper", "right_waist", "right_elbow", "right_gripper"]
    features = {"observation.state": {"dtype": "float32", "shape": [6], "names": names}}
    stats = {"observation.state": {"min": [0, 0, 0.1, 0, 0, 0.2], "max": [1, 1, 0.9, 1, 1, 0.8]}}
    dims = find_dims(features, MotionParams(), stats)
    assert [(g.name, g.dims, g.low, g.high) for g in dims.grippers] == [
        ("left gripper", [2], 0.1, 0.9),
        ("right gripper", [5], 0.2, 0.8),
    ]


def test_overrides_and_their_errors() -> None:
    dims = find_dims(
        EE_FEATURES, MotionParams(gripper_dims=(), position_dims=("ee.z", 0), position_kind="joint")
    )
    assert dims.grippers == [] and dims.position == [2, 0] and dims.kind == "joint"
    assert any("--motion.gripper_dims" in note for note in dims.notes)
    with pytest.raises(ConfigError, match=r"motion\.gripper_dims: 'claw' is not a dimension"):
        find_dims(EE_FEATURES, MotionParams(gripper_dims=("claw",)))
    with pytest.raises(ConfigError, match=r"motion\.position_dims: index 9 is out of range"):
        find_dims(EE_FEATURES, MotionParams(position_dims=(9,)))
    with pytest.raises(ConfigError, match=r"motion\.state_key: 'obs' is not a float vector feature"):
        find_dims(EE_FEATURES, MotionParams(state_key="obs"))


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"motion\.smoothing_s"):
        MotionConfig(smoothing_s=-1)
    with pytest.raises(ConfigError, match=r"motion\.gripper_treshold"):
        MotionConfig(gripper_treshold=0.2)
    with pytest.raises(ConfigError, match="gripper_dims lists a dimension twice"):
        MotionConfig(gripper_dims=["gripper.pos", "gripper.pos"])


def test_the_flags_map_onto_the_library_parameters() -> None:
    module_only = {"enabled", "subtask_granularity", "name_from_task"}
    assert set(MotionConfig.model_fields) - module_only == {f.name for f in fields(MotionParams)}
    assert MotionConfig().params() == MotionParams()  # the same defaults
    config = MotionConfig(gripper_dims=["gripper.pos"], position_dims=[0, "ee.y"], smoothing_s=0.5)
    assert config.params() == MotionParams(
        gripper_dims=("gripper.pos",), position_dims=(0, "ee.y"), smoothing_s=0.5
    )


def test_the_motion_library_imports_no_annotation_engine() -> None:
    code = (
        "import pkgutil, sys, importlib, steerable.motion as m\n"
        "for info in pkgutil.iter_modules(m.__path__):\n"
        "    importlib.import_module(f'steerable.motion.{info.name}')\n"
        "bad = sorted(n for n in sys.modules if n.startswith(('steerable.annotate', 'steerable.vlm')))\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_no_vector_feature_is_a_note_not_a_crash() -> None:
    dims = find_dims({"timestamp": {"dtype": "float32", "shape": [1]}}, MotionParams())
    assert dims.state_key is None and dims.kind == "none" and dims.notes
    ts = np.arange(10, dtype=np.float32) / FPS
    assert motion_rows(ts, np.zeros((10, 0)), dims, MotionParams()) == []


@pytest.mark.parametrize("frames", [0, 1, 2])
def test_tiny_episodes_do_not_crash(frames: int) -> None:
    ts = np.arange(frames, dtype=np.float32) / FPS
    state = np.zeros((frames, 4), dtype=np.float32)
    dims = find_dims(EE_FEATURES, CLOSED_HIGH)
    assert detect_keystates(ts, state, dims, CLOSED_HIGH) == []
    assert texts(motion_rows(ts, state, dims, CLOSED_HIGH)) == ["hold still"][:frames]
    assert texts(heuristic_subtasks(ts, [], "stack")) == ["stack"][:frames]


# --- keystates --------------------------------------------------------------------------------


@pytest.mark.parametrize("noise", [0.0, 1.0])
def test_gripper_events_on_the_true_frames_even_with_noise(noise: float) -> None:
    ts, state = scripted(noise=noise, seed=3)
    dims = find_dims(EE_FEATURES, CLOSED_HIGH)
    events = [k for k in detect_keystates(ts, state, dims, CLOSED_HIGH) if k.kind != "pause"]
    assert [k.kind for k in events] == ["gripper_close", "gripper_open"]
    assert abs(events[0].time - TRUE_CLOSE_S) <= 2 / FPS and abs(events[1].time - TRUE_OPEN_S) <= 2 / FPS
    assert all(k.time == float(ts[k.frame_index]) for k in events)  # on stored frame timestamps
    assert all(k.start_index <= k.frame_index <= k.end_index for k in events)


def test_gripper_stalled_on_an_object_and_still_gripper() -> None:
    ts, state = scripted()
    state[:, 3] = np.where(state[:, 3] > 0.35, 0.35, state[:, 3])  # fingers stop on a wide object
    dims = find_dims(EE_FEATURES, CLOSED_HIGH)
    kinds = [k.kind for k in detect_keystates(ts, state, dims, CLOSED_HIGH) if k.kind != "pause"]
    assert kinds == ["gripper_close", "gripper_open"]
    state[:, 3] = 0.5 + np.random.default_rng(0).normal(0, 0.002, len(ts))  # never moves: only noise
    assert not [k for k in detect_keystates(ts, state, dims, CLOSED_HIGH) if k.kind != "pause"]


def test_a_hold_in_mid_motion_is_a_pause_ending_where_motion_resumes() -> None:
    ts, state = scripted()
    dims = find_dims(EE_FEATURES, CLOSED_HIGH)
    pauses = [k for k in detect_keystates(ts, state, dims, CLOSED_HIGH) if k.kind == "pause"]
    hold_end = sum(p[0] for p in PLAN[:7])  # the 0.8 s hold after the carry
    strongest = max(pauses, key=lambda k: k.strength)
    assert abs(strongest.time - hold_end) <= 2 / FPS
    assert (strongest.end_index - strongest.start_index) / FPS >= 0.5
    # Idling at the very start or end is not a pause.
    assert all(k.start_index > 0 and k.end_index < len(ts) - 1 for k in pauses)


# --- primitives -------------------------------------------------------------------------------


def test_motion_rows_read_like_the_script() -> None:
    ts, state = scripted()
    dims = find_dims(EE_FEATURES, CLOSED_HIGH)
    rows = motion_rows(ts, state, dims, CLOSED_HIGH)
    assert texts(rows) == [
        "hold still",
        "move left",
        "move down",
        "close gripper",
        "lift",
        "move forward",
        "hold still",
        "move down",
        "open gripper",
        "move up",
        "hold still",
    ]
    assert all(r["style"] == "motion" and r["role"] == "assistant" and r["camera"] is None for r in rows)
    stored = {float(t) for t in ts}
    assert all(r["timestamp"] in stored for r in rows) and rows[0]["timestamp"] == float(ts[0])
    keystates = detect_keystates(ts, state, dims, CLOSED_HIGH)
    assert motion_rows(ts, state, dims, CLOSED_HIGH, keystates=keystates) == rows
    flipped = MotionParams(gripper_closed_is_high=True, flip_y=True, flip_x=True)
    assert texts(motion_rows(ts, state, dims, flipped))[1:6:4] == ["move right", "move back"]


def test_primitives_are_debounced_and_deterministic_under_noise() -> None:
    ts, state = scripted(noise=1.0, seed=7)
    dims = find_dims(EE_FEATURES, CLOSED_HIGH)
    segments = primitive_segments(ts, state, dims, CLOSED_HIGH)
    assert segments == primitive_segments(ts, state, dims, CLOSED_HIGH)
    assert all(
        p.end_index - p.start_index >= CLOSED_HIGH.min_primitive_s * FPS
        for p in segments
        if not p.text.endswith("gripper")
    )
    assert segments[0].start_index == 0 and segments[-1].end_index == len(ts)
    assert [p.text for p in segments if p.text.endswith("gripper")] == ["close gripper", "open gripper"]
    assert "lift" in [p.text for p in segments]


def test_wrong_polarity_is_fixed_by_the_flag() -> None:
    ts, state = scripted()
    auto = find_dims(EE_FEATURES, MotionParams())  # "gripper.pos" reads as larger = more open
    assert "open gripper" in texts(motion_rows(ts, state, auto, MotionParams()))[:5]
    fixed = find_dims(EE_FEATURES, CLOSED_HIGH)
    assert "close gripper" in texts(motion_rows(ts, state, fixed, CLOSED_HIGH))[:5]


# --- heuristic subtasks -----------------------------------------------------------------------


def test_heuristic_subtasks_fine_and_coarse() -> None:
    ts, state = scripted()
    keystates = detect_keystates(ts, state, find_dims(EE_FEATURES, CLOSED_HIGH), CLOSED_HIGH)
    fine = heuristic_subtasks(ts, keystates, "put the cube in the bin", name_from_task=False)
    assert texts(fine) == [
        "reach for the object",
        "grasp the object",
        "move it to the target",
        "release it",
        "retreat",
    ]
    coarse = heuristic_subtasks(ts, keystates, "put the cube in the bin", granularity="coarse", name_from_task=False)
    assert texts(coarse) == ["pick up the object", "place it at the target"]
    # A task that names its one pick-and-place names the same phases, on the same frames.
    named = heuristic_subtasks(ts, keystates, "put the cube in the bin")
    assert texts(subtasks_of(named)) == [
        "reach for the cube", "grasp the cube", "move the cube to the bin", "release the cube", "retreat"]
    assert [r["timestamp"] for r in subtasks_of(named)] == [r["timestamp"] for r in fine]
    named = heuristic_subtasks(ts, keystates, "put the cube in the bin", granularity="coarse")
    assert texts(subtasks_of(named)) == ["pick up the cube", "place the cube in the bin"]
    assert [r["timestamp"] for r in subtasks_of(named)] == [r["timestamp"] for r in coarse]
    lift_end = sum(p[0] for p in PLAN[:5])
    assert abs(coarse[1]["timestamp"] - lift_end) <= 2 / FPS  # pick ends where the lift stops
    for rows in (fine, coarse):
        starts = [r["timestamp"] for r in rows]
        assert starts[0] == float(ts[0]) and starts == sorted(set(starts))
        assert all(r["style"] == "subtask" and r["role"] == "assistant" for r in rows)


def test_heuristic_subtasks_without_gripper_events() -> None:
    ts = np.arange(60, dtype=np.float32) / FPS
    pause = Keystate(float(ts[30]), 30, "pause", 0.6, 20, 30)
    brief = Keystate(float(ts[45]), 45, "pause", 0.1, 45, 45)
    rows = heuristic_subtasks(ts, [pause, brief], "wipe the table")
    assert [(r["timestamp"], r["content"]) for r in rows] == [
        (0.0, "wipe the table (part 1 of 2)"),
        (float(ts[30]), "wipe the table (part 2 of 2)"),
    ]
    assert texts(heuristic_subtasks(ts, [], "wipe the table")) == ["wipe the table"]
    # A close after the release is the gripper going back to rest, not a second grasp.
    grip = [
        Keystate(float(ts[i]), i, kind, 1.0, i - 2, i + 2, "gripper")
        for i, kind in [
            (5, "gripper_open"),
            (15, "gripper_close"),
            (35, "gripper_open"),
            (50, "gripper_close"),
        ]
    ]
    coarse = heuristic_subtasks(ts, grip, "", granularity="coarse")
    assert texts(coarse) == ["pick up the object", "place it at the target"]


# --- snapping and metrics ---------------------------------------------------------------------


def test_snapping_moves_to_keystates_within_tolerance_on_distinct_frames() -> None:
    ts = np.arange(100, dtype=np.float32) / 10
    keys = [Keystate(float(ts[i]), i, "pause", 0.5, i - 3, i) for i in (20, 50, 80)]
    keys.append(Keystate(float(ts[60]), 60, "gripper_close", 1.0, 58, 62, "gripper"))
    snapped = snap_boundaries([2.3, 2.4, 5.4, 7.0], keys, 0.5, ts)
    assert snapped == [float(ts[20]), float(ts[24]), float(ts[50]), float(ts[70])]
    assert snap_boundaries([5.9], keys, 0.5, ts, kinds=("gripper_close",)) == [float(ts[60])]
    assert snap_boundaries([0.51], [], 0.5, ts) == [float(ts[5])]  # nothing near: nearest frame
    assert snap_boundaries([9.9, 9.95], [], 0.5, ts) == [float(ts[99]), float(ts[99])]  # out of frames


def test_metrics() -> None:
    score = event_precision_recall([1.0, 2.0, 5.0], [1.1, 2.3, 9.0], tolerance_s=0.2)
    assert (score.matched, score.precision, score.recall) == (1, 1 / 3, 1 / 3)
    assert event_precision_recall([], [], 0.1).f1 == 1.0 and event_precision_recall([1.0], [], 0.1).f1 == 0.0
    true = spans_from_starts([0.0, 4.0, 6.0], 10.0)
    assert true == [(0.0, 4.0), (4.0, 6.0), (6.0, 10.0)]
    assert segmentation_f1(true, true).f1 == 1.0
    pred = spans_from_starts([0.0, 3.5, 8.0], 10.0)  # IoU 0.875, 0.44 (too little), 0.5 (just enough)
    assert segmentation_f1(pred, true).matched == 2
    assert segmentation_f1(pred, true, iou_threshold=0.6).matched == 1
    assert boundary_mae([3.5, 8.0], [4.0, 6.0]) == pytest.approx(1.25)
    assert boundary_mae([], [1.0]) == float("inf") and boundary_mae([1.0], []) == 0.0


# --- real and synthetic datasets ---------------------------------------------------------------


def run_dataset(root: Path, params: MotionParams) -> tuple[DimSelection, list[tuple[np.ndarray, np.ndarray]]]:
    """The dims of a dataset (with its stats) and every episode's (timestamps, state)."""
    ds = open_dataset(root)
    stats = json.loads((root / "meta" / "stats.json").read_text())
    dims = find_dims(ds.features, params, stats)
    episodes = []
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, ["timestamp", dims.state_key or ""])
        episodes.append(
            (feature_matrix(table, "timestamp")[:, 0], feature_matrix(table, dims.state_key or ""))
        )
    return dims, episodes


def test_real_so101_arm_with_gripper(so101: Path) -> None:
    params = MotionParams()
    dims, episodes = run_dataset(so101, params)
    assert dims.gripper == [5] and dims.kind == "joint"
    for ts, state in episodes:
        keystates = detect_keystates(ts, state, dims, params)
        kinds = [k.kind for k in keystates]
        # Open to approach, close on the cube, open to drop it, close back to rest.
        assert [k for k in kinds if k != "pause"] == ["gripper_open", "gripper_close"] * 2
        rows = motion_rows(ts, state, dims, params)
        assert texts(rows)[0] == "hold still" and "close gripper" in texts(rows)
        assert all(t.startswith(("move ", "hold", "close", "open", "lift")) for t in texts(rows))
        assert texts(heuristic_subtasks(ts, keystates, "pick", granularity="coarse")) == [
            "pick up the object",
            "place it at the target",
        ]


def test_real_lingzu_without_gripper_gives_notes_and_joint_rows(lingzu: Path) -> None:
    params = MotionParams()
    dims, episodes = run_dataset(lingzu, params)
    notes = " ".join(dims.notes)
    assert "dexterous hand" in notes and "no gripper dimension in 'state'" in notes
    for ts, state in episodes:
        keystates = detect_keystates(ts, state, dims, params)
        assert all(k.kind == "pause" for k in keystates)
        rows = texts(motion_rows(ts, state, dims, params))
        assert "move right arm" in rows and "hold still" in rows
        assert all(r == "hold still" or r.startswith("move ") for r in rows)
        subtasks = texts(heuristic_subtasks(ts, keystates, "lingzu teleoperation"))
        assert all(s.startswith("lingzu teleoperation") for s in subtasks)


def test_synthetic_keystates_match_truth_and_snapping_helps(tmp_path: Path) -> None:
    root = generate_synthetic(tmp_path / "syn", episodes=6, cameras=("top",), seed=11)
    truth = read_ground_truth(root)
    dims, episodes = run_dataset(root, CLOSED_HIGH)
    rng = np.random.default_rng(0)
    matched = predicted = true = 0
    before, after, f1 = [], [], []
    for index, (ts, state) in enumerate(episodes):
        gt = truth[index]
        keystates = detect_keystates(ts, state, dims, CLOSED_HIGH)
        for kind in ("close", "open"):
            pred = [k.time for k in keystates if k.kind == f"gripper_{kind}"]
            real = [e.time for e in gt.gripper_events if e.kind == kind]
            score = event_precision_recall(pred, real, tolerance_s=0.2)
            matched, predicted, true = matched + score.matched, predicted + len(pred), true + len(real)
        cuts = [s.start for s in gt.subtasks[1:]]
        jittered = [c + rng.choice([-0.5, 0.5]) for c in cuts]
        before.append(boundary_mae(jittered, cuts))
        after.append(boundary_mae(snap_boundaries(jittered, keystates, 0.6, ts), cuts))
        rows = heuristic_subtasks(ts, keystates, gt.task, granularity="coarse")
        spans = spans_from_starts([r["timestamp"] for r in rows], float(ts[-1]))
        f1.append(segmentation_f1(spans, [(s.start, s.end) for s in gt.subtasks]).f1)
    assert matched / predicted >= 0.9 and matched / true >= 0.9
    assert np.mean(after) < 0.5 * np.mean(before)
    assert np.mean(f1) >= 0.8
