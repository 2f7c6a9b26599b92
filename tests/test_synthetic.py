"""The synthetic tabletop dataset: deterministic, valid LeRobot v3, videos and ground truth agree."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from steerable.dataset import open_dataset
from steerable.errors import ConfigError
from steerable.synthetic import generate_synthetic, read_ground_truth, render_frame, simulate_episode
from steerable.synthetic.generate import synthetic_features
from steerable.synthetic.render import CAMERAS, camera_sizes, object_boxes
from steerable.synthetic.world import GRASP_THRESHOLD

SEED = 7
EPISODES = 4
FPS = 15
CAMS = ("observation.images.top", "observation.images.wrist")


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_synthetic(tmp_path_factory.mktemp("synth") / "ds", episodes=EPISODES, seed=SEED)


def decoded(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24").astype(np.int16) for f in container.decode(video=0)]


def test_same_seed_gives_identical_files(synth: Path, tmp_path: Path) -> None:
    again = generate_synthetic(tmp_path / "again", episodes=EPISODES, seed=SEED)
    first, second = digests(synth), digests(again)
    assert first.keys() == second.keys()
    videos = [name for name in first if name.endswith(".mp4")]
    assert len(videos) == 2
    assert {k: v for k, v in first.items() if k not in videos} == {
        k: v for k, v in second.items() if k not in videos
    }
    # libx264 occasionally emits a different bitstream for the same frames, even on one thread (about
    # one encode in five of 689 textured 224x160 frames, measured), so videos are compared by content:
    # the same frames, differing at most by encoder noise (a mean of up to ~1.4 levels seen).
    for name in videos:
        ours, theirs = decoded(synth / name), decoded(again / name)
        assert len(ours) == len(theirs)
        assert max(float(np.abs(a - b).mean()) for a, b in zip(ours, theirs, strict=True)) < 2.0

def test_other_seed_gives_other_episodes(synth: Path, tmp_path: Path) -> None:
    other = generate_synthetic(tmp_path / "other", episodes=1, seed=SEED + 1, cameras=("top",))
    ours = pq.read_table(synth / "data/chunk-000/file-000.parquet", columns=["observation.state"])
    theirs = pq.read_table(other / "data/chunk-000/file-000.parquet", columns=["observation.state"])
    assert ours.slice(0, 10) != theirs.slice(0, 10)
    assert list(json.loads((other / "meta/info.json").read_text())["features"])[2] == "observation.images.top"
    assert "observation.images.wrist" not in json.loads((other / "meta/info.json").read_text())["features"]


def test_layout_is_a_valid_lerobot_v3_dataset(synth: Path) -> None:
    info = json.loads((synth / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == FPS
    assert info["features"]["observation.state"]["names"] == ["ee.x", "ee.y", "ee.z", "gripper.closure"]
    assert info["features"]["action"]["names"] == info["features"]["observation.state"]["names"]
    assert info["features"]["observation.images.top"]["shape"] == [160, 224, 3]
    assert info["features"]["observation.images.wrist"]["shape"] == [160, 224, 3]  # one shape for both cameras
    ds = open_dataset(synth)
    assert ds.camera_keys == list(CAMS)
    assert len(ds.episodes) == EPISODES == info["total_episodes"]
    assert sum(e.length for e in ds.episodes) == info["total_frames"]
    pf = pq.ParquetFile(synth / "data/chunk-000/file-000.parquet")
    assert pf.num_row_groups == EPISODES
    next_index = 0
    for ep in ds.episodes:
        assert 6 <= ep.length / FPS <= 15, "episodes last 6-15 s"
        assert (ep.from_index, ep.to_index) == (next_index, next_index + ep.length)
        next_index = ep.to_index
        for cam in CAMS:
            span = ep.videos[cam]
            assert span.to_timestamp - span.from_timestamp == pytest.approx(ep.length / FPS)
            assert span.from_timestamp == pytest.approx(ep.from_index / FPS)  # one file holds them all


def test_recorded_state_is_the_simulated_state(synth: Path) -> None:
    ds = open_dataset(synth)
    task, demo = simulate_episode(SEED, 1, FPS)
    assert ds.tasks[ds.read_episode(1, ["task_index"]).column(0)[0].as_py()] == task.text
    state = np.array(ds.read_episode(1, ["observation.state"]).column(0).to_pylist(), dtype=np.float32)
    np.testing.assert_array_equal(state, demo.observations())
    action = np.array(ds.read_episode(1, ["action"]).column(0).to_pylist(), dtype=np.float32)
    # The action is where the expert sends the gripper next: the next state up to tracking noise.
    assert np.abs(action[:-1, :3] - state[1:, :3]).max() < 0.01


def _changed_mad(decoded: np.ndarray, want: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """Mean abs error of `decoded` against `want` and `other`, over the pixels where the two differ."""
    mask = np.any(want != other, axis=-1)
    d = decoded.astype(np.int16)[mask]
    return float(np.abs(d - want[mask]).mean()), float(np.abs(d - other[mask]).mean())


@pytest.mark.parametrize("camera", CAMS)
def test_decoded_frames_match_render_frame(synth: Path, camera: str) -> None:
    ds = open_dataset(synth)
    ep = 2
    _, demo = simulate_episode(SEED, ep, FPS)
    obs = demo.observations()
    speed = np.linalg.norm(np.diff(obs[:, :3], axis=0), axis=1)
    moving = [int(i) for i in np.argsort(-speed[1:])[:3] + 1]  # fast frames differ most from neighbours
    frames = [0, *moving, len(obs) - 1]
    stored = ds.episode_timestamps(ep)
    decoded = ds.decode_frames(ep, camera, [float(stored[i]) for i in frames])
    for i, dec in zip(frames, decoded, strict=True):
        want = render_frame(demo.states[i], camera)
        assert dec.shape == want.shape
        assert np.abs(dec.astype(np.int16) - want).mean() < 4, f"frame {i} is not the rendered frame"
    for i, dec in zip(frames[1:-1], decoded[1:-1], strict=True):
        want = render_frame(demo.states[i], camera)
        for j in (i - 1, i + 1):
            same, neighbour = _changed_mad(dec, want, render_frame(demo.states[j], camera))
            assert same * 3 < neighbour, f"frame {i} looks as much like frame {j} as like itself"


def test_render_frame_accepts_short_and_full_camera_names() -> None:
    _, demo = simulate_episode(0, 0, FPS)
    np.testing.assert_array_equal(render_frame(demo.states[5], "top"), render_frame(demo.states[5], CAMS[0]))
    assert render_frame(demo.states[5], "wrist").shape == (160, 224, 3)
    with pytest.raises(ConfigError, match="unknown camera"):
        render_frame(demo.states[5], "front")


def test_legacy_camera_shapes_keep_the_square_wrist_camera_as_the_centre_of_the_wide_one() -> None:
    _, demo = simulate_episode(0, 0, FPS)
    legacy = camera_sizes("legacy")
    square = render_frame(demo.states[40], "wrist", legacy["wrist"])
    assert square.shape == (128, 128, 3)
    np.testing.assert_array_equal(render_frame(demo.states[40], "wrist")[16:144, 48:176], square)
    features = synthetic_features(["top", "wrist"], camera_shapes="legacy")
    assert features["observation.images.wrist"]["shape"] == [128, 128, 3]
    assert features["observation.images.top"]["shape"] == [160, 224, 3]
    with pytest.raises(ConfigError, match="--camera_shapes 'wide'"):
        camera_sizes("wide")


def test_subtasks_cover_each_episode_on_frame_timestamps(synth: Path) -> None:
    ds = open_dataset(synth)
    truth = read_ground_truth(synth)
    assert sorted(truth) == list(range(EPISODES))
    for ep in ds.episodes:
        gt = truth[ep.episode_index]
        stamps = [float(t) for t in ds.episode_timestamps(ep.episode_index)]
        subtasks = gt.subtasks
        assert ep.tasks == [gt.task]
        assert subtasks[0].start == 0.0 and subtasks[-1].end == stamps[-1]
        for a, b in zip(subtasks, subtasks[1:], strict=False):
            assert a.end == b.start and a.start < a.end
        assert {s.start for s in subtasks} <= set(stamps)
        assert [s.text.split()[0] for s in subtasks] == ["pick", "place"] * (len(subtasks) // 2)


def test_gripper_events_sit_where_gripper_pos_crosses(synth: Path) -> None:
    ds = open_dataset(synth)
    truth = read_ground_truth(synth)
    for ep in ds.episodes:
        table = ds.read_episode(ep.episode_index, ["timestamp", "observation.state"])
        grip = np.array(table.column("observation.state").to_pylist())[:, 3]
        stamps = table.column("timestamp").to_pylist()
        events = truth[ep.episode_index].gripper_events
        n_steps = len(truth[ep.episode_index].subtasks) // 2
        assert [e.kind for e in events] == ["close", "open"] * n_steps
        closed = grip >= GRASP_THRESHOLD
        assert sum(closed[1:] != closed[:-1]) == len(events)
        for e in events:
            assert stamps[e.frame_index] == e.time
            assert closed[e.frame_index] == (e.kind == "close") != closed[e.frame_index - 1]


def test_expert_completes_its_task() -> None:
    for ep in range(8):
        task, demo = simulate_episode(SEED, ep, FPS)
        final = demo.states[-1]
        assert final.held is None
        for step in task.steps:
            x, y, z = final.positions[final.scene.cube_index(step.cube)]
            if step.stack:
                tx, ty, tz = final.positions[final.scene.cube_index(step.target)]
                assert abs(x - tx) < 0.01 and abs(y - ty) < 0.01 and z == pytest.approx(tz + 0.04)
            else:
                x0, y0, x1, y1 = final.scene.receptacle(step.target).rect
                assert x0 < x < x1 and y0 < y < y1 and z == 0.0, f"episode {ep}: {step.cube} missed"


def test_boxes_are_inside_the_image_and_on_the_objects(synth: Path) -> None:
    truth = read_ground_truth(synth)
    _, demo = simulate_episode(SEED, 0, FPS)
    for cam in CAMS:
        width, height = CAMERAS[cam.rsplit(".", 1)[-1]]
        per_frame = truth[0].boxes[cam]
        assert len(per_frame) == len(demo.states)
        for boxes in per_frame:
            for b in boxes:
                x0, y0, x1, y1 = b["box"]
                assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
    image = render_frame(demo.states[0], "top")
    colors = {c.name: c.color for c in demo.states[0].scene.cubes}
    cube_boxes = [b for b in truth[0].boxes[CAMS[0]][0] if b["name"] in colors]
    assert len(cube_boxes) == len(colors), "every cube is visible from the top camera"
    for b in cube_boxes:
        x0, y0, x1, y1 = b["box"]
        patch = image[y0:y1, x0:x1].reshape(-1, 3)
        assert (patch == colors[b["name"]]).all(axis=1).mean() > 0.5, f"{b['name']} is not drawn in its box"


def test_wrist_camera_sees_the_grasped_cube() -> None:
    task, demo = simulate_episode(SEED, 0, FPS)
    closes = [
        i
        for i in range(1, len(demo.states))
        if demo.states[i].held is not None and demo.states[i - 1].held is None
    ]
    assert closes
    state = demo.states[closes[0]]
    held = state.scene.cubes[state.held].name
    assert held == task.steps[0].cube
    boxes = {b["name"]: b["box"] for b in object_boxes(state, "wrist")}
    x0, y0, x1, y1 = boxes[held]
    width, height = CAMERAS["wrist"]
    assert x0 < width // 2 < x1 and y0 < height // 2 < y1, "the held cube is under the wrist camera"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "steerable"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "steerable.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120)


def test_cli_makes_a_dataset_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    made = _cli(
        "make-dataset", "synthetic", "--out", str(out), "--episodes", "2", "--cameras", "top", "--seed", "3"
    )
    assert made.returncode == 0, made.stderr
    assert str(out) in made.stdout and "2 episodes" in made.stdout and "frames" in made.stdout
    assert open_dataset(out).camera_keys == ["observation.images.top"]
    before = digests(out)

    refused = _cli("make-dataset", "synthetic", "--out", str(out), "--episodes", "1")
    assert refused.returncode == 2
    assert "--overwrite" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert digests(out) == before, "a refused run must leave the dataset untouched"

    replaced = _cli("make-dataset", "synthetic", "--out", str(out), "--episodes", "1", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert len(open_dataset(out).episodes) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["cli"], "no staging folder is left behind"


def test_cli_overwrite_never_deletes_a_folder_that_is_not_a_dataset(tmp_path: Path) -> None:
    keep = tmp_path / "notes.txt"
    keep.write_text("precious")
    result = _cli("make-dataset", "synthetic", "--out", str(tmp_path), "--episodes", "1", "--overwrite")
    assert result.returncode == 2 and "not a LeRobot dataset" in result.stderr
    assert keep.read_text() == "precious"


def test_cli_rejects_an_unknown_camera(tmp_path: Path) -> None:
    result = _cli("make-dataset", "synthetic", "--out", str(tmp_path / "x"), "--cameras", "top,front")
    assert result.returncode == 2 and "front" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists()
