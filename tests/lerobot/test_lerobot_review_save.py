"""A SIGKILL of `steerable view --edit` in the middle of a save, read back by LeRobot's own reader.

The main suite (tests/test_viewer_edit.py) kills the edit server during a save and reads the dataset
with pyarrow and Hugging Face `datasets`; this is the same kill, read by lerobot 0.6.1's
`LeRobotDataset` before any steerable code has opened (and so repaired) the folder: every frame's
language columns are wholly the old version or wholly the new one, and frames decode, pixel for pixel
as before (a save never touches a video).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import datasets
import pytest
import torch
from lerobot.datasets import lerobot_dataset

from steerable.cli.main import main
from steerable.dataset import LeRobotDataset
from steerable.dataset.review import restore_revision, save_episode
from test_viewer_edit import Edit, copy_dataset, dataset_state, episode_body
from viewer_data import start_view

TOP = "observation.images.top"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("review_save") / "made"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["make-dataset", "synthetic", "--out", str(root), "--episodes", "3", "--fps", "5",
                     "--with_language", "--interjection_rate", "1"])
    assert code == 0, err.getvalue()
    return root


@pytest.fixture(autouse=True)
def own_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LeRobot loads the shards through `datasets`, which caches Arrow copies: a fresh cache per test."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def read_with_lerobot(root: Path) -> tuple[list[tuple[int, Any, Any]], dict[int, torch.Tensor]]:
    """Every frame's (episode, language_persistent, language_events) as LeRobot's dataset returns them,
    and the decoded top-camera image of each episode's first and last frame, by frame index."""
    data = lerobot_dataset.LeRobotDataset("local/edited", root=root)
    language = []
    for i in range(len(data)):
        raw = data.get_raw_item(i)
        language.append((int(raw["episode_index"]), raw["language_persistent"], raw["language_events"]))
    images = {}
    starts, ends = data.meta.episodes["dataset_from_index"], data.meta.episodes["dataset_to_index"]
    for i in [i for a, b in zip(starts, ends, strict=True) for i in (a, b - 1)]:
        item = data[i]  # the full item: video decoded, as a training loop gets it
        image = item[TOP]
        assert image.shape == (3, 160, 224) and image.dtype == torch.float32 and 0 <= image.min() <= image.max() <= 1
        assert (int(item["episode_index"]), item["language_persistent"], item["language_events"]) == language[i]
        images[i] = image
    return language, images


def _ignore(fn: Any, *args: Any) -> None:
    with contextlib.suppress(OSError, http.client.HTTPException):  # the server was killed under the request
        fn(*args)


@pytest.mark.timeout(180)
def test_lerobots_reader_sees_the_old_or_the_new_version_after_a_sigkill_mid_save(made: Path, tmp_path: Path) -> None:
    root = copy_dataset(made, tmp_path / "ds")
    body = episode_body(LeRobotDataset(root), 1)
    body["persistent"] = [r for r in body["persistent"] if r["style"] != "subtask" or r["timestamp"] == 0.0]
    body["status"] = "reviewed"
    old_state = dataset_state(root)
    old, images = read_with_lerobot(root)
    twin = copy_dataset(root, tmp_path / "twin")  # the same save, made whole: the new version
    save_episode(LeRobotDataset(twin), 1, body["persistent"], [(e["t"], e["row"]) for e in body["events"]],
                 status="reviewed")
    new_state = dataset_state(twin)
    new, _ = read_with_lerobot(twin)
    changed = {ep for (ep, *a), (_, *b) in zip(old, new, strict=True) if a != b}
    assert changed == {1}  # the save rewrote episode 1's language, and nothing else LeRobot reads

    proc, url = start_view(str(root), "--edit")  # one whole save, timed: where the kills should land
    session = Edit(proc, url)
    session.get("/api/dataset")
    started = time.perf_counter()
    assert session.post("/api/episodes/1/language", body)[0] == 200
    whole = time.perf_counter() - started
    session.stop()
    assert dataset_state(root) == new_state and read_with_lerobot(root)[0] == new
    restore_revision(LeRobotDataset(root), 0)
    assert dataset_state(root) == old_state

    rng = random.Random(11)
    seen = []
    for attempt, share in enumerate((0.0, 0.25, 0.5, 0.75, 1.0, 1.5)):
        proc, url = start_view(str(root), "--edit")
        session = Edit(proc, url)
        session.get("/api/dataset")  # up and warm
        thread = threading.Thread(target=_ignore, args=(session.post, "/api/episodes/1/language", body), daemon=True)
        thread.start()
        time.sleep(whole * share * rng.uniform(0.8, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=20)
        thread.join(30)
        mid = any(".steerable-" in p.name for p in root.parent.iterdir())  # a commit's siblings are left
        language, decoded = read_with_lerobot(root)  # LeRobot first: nothing of steerable has run since the kill
        assert language in (old, new), f"attempt {attempt}: LeRobot reads a mix of the old and the new language"
        assert decoded.keys() == images.keys() and all(torch.equal(decoded[i], images[i]) for i in images)
        version = "new" if language == new else "old"
        LeRobotDataset(root)  # steerable's open finishes or undoes what the kill left beside the folder
        assert dataset_state(root) in (old_state, new_state)
        if dataset_state(root) == new_state:
            restore_revision(LeRobotDataset(root), 0)  # back to the old version for the next attempt
        assert dataset_state(root) == old_state
        seen.append(version + (" (killed mid-commit)" if mid else ""))
    print(f"a whole save took {whole * 1000:.0f} ms; LeRobot read after each SIGKILL:", seen)
    assert not [p for p in root.parent.iterdir() if ".steerable-" in p.name]
    assert any(s.startswith("old") for s in seen) and any(s.startswith("new") for s in seen)
