"""The goal head: where a command ends, learnt from where its segment ended, read from cameras and words.

A world that is not the simulator's: joints j0..j2 and a gripper, no object in the state, the words
"mug" and "tray"; the default policy trains on it and runs through `steerable run`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from policy_helpers import TINY, TINY_FLAGS, one_thread  # noqa: F401
from steerable.dataset import open_dataset
from steerable.dataset.build import DatasetBuilder
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.policy.checkpoint import load_policy
from steerable.policy.data import PolicyDataset
from steerable.policy.episodes import EpisodeSubtasks
from steerable.recipes import load_recipe

JOINTS = ["j0", "j1", "j2", "gripper"]
SIZE = 32
CAMERAS = ("observation.images.top", "observation.images.wrist")


def _frames(where: np.ndarray, n: int) -> np.ndarray:
    """A plain table with a dark square at `where` (in [0, 1]^2) on every frame."""
    out = np.full((n, SIZE, SIZE, 3), 180, np.uint8)
    u, v = (np.clip(where, 0, 0.9) * SIZE).astype(int)
    out[:, v: v + 4, u: u + 4] = (40, 60, 200)
    return out


def _world(root: Path) -> Path:
    """Four episodes: the arm goes to the mug ("lift the mug"), then to the tray ("set the mug onto the tray")."""
    features = {"observation.state": {"dtype": "float32", "shape": [4], "names": JOINTS},
                "action": {"dtype": "float32", "shape": [4], "names": JOINTS},
                **{cam: {"dtype": "video", "shape": [SIZE, SIZE, 3]} for cam in CAMERAS}}
    rng = np.random.default_rng(0)
    with DatasetBuilder(root, fps=10, features=features, robot_type="arm") as builder:
        for _ in range(4):
            mug, tray = rng.uniform(0.1, 0.5, 2), rng.uniform(0.1, 0.5, 2)
            t = np.minimum(np.arange(30, dtype=np.float32) / 12, 1.0)[:, None]
            first = np.concatenate([0.3 + (mug - 0.3) * t[:15], 0.05 + 0 * t[:15], (t[:15] > 0.5)], axis=1)
            last = first[-1]
            second = np.concatenate([last[:2] + (tray - last[:2]) * t[:15], 0.05 + 0 * t[:15], 1 - (t[:15] > 0.9)],
                                    axis=1)
            arm = np.concatenate([first, second]).astype(np.float32)
            builder.add_episode("set the mug onto the tray", {"observation.state": arm, "action": arm},
                                {cam: _frames(mug, len(arm)) for cam in CAMERAS})
    ds = open_dataset(root)

    def row(content: str, at: float) -> dict[str, Any]:
        return {"role": "assistant", "content": content, "style": "subtask", "camera": None, "tool_calls": None,
                "timestamp": at}

    write_language(ds, {e.episode_index: EpisodeLanguage(persistent=[row("lift the mug", 0.0),
                                                                     row("set the mug onto the tray", 1.5)])
                        for e in ds.episodes})
    return root


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _world(tmp_path_factory.mktemp("goal") / "ds")


def test_a_segment_ends_where_the_next_begins_and_a_cut_one_has_no_goal() -> None:
    spans = EpisodeSubtasks([(0, "a"), (10, "b"), (20, "c"), (30, "a")], event_frames=[20], final_still=37,
                            length=40, fps=10)
    assert spans.end_row(0, "a") == 9 and spans.end_row(9, "a") == 9
    assert spans.end_row(12, "a") == 9  # "a" reported done on the next segment's first second
    assert spans.end_row(5, "b") is None  # not begun
    assert spans.end_row(15, "b") is None  # an interjection started the next segment: "b" was cut short
    assert spans.end_row(25, "c") == 29
    assert spans.end_row(33, "a") == 37  # the episode's last command ends on its final stillness


def test_the_goal_label_is_the_state_where_the_segment_ends(world: Path) -> None:
    from policy_helpers import build

    ds = open_dataset(world)
    built = build(ds, goal_head=True)
    assert built.model.goal is not None  # cameras and commanded joints: a goal head is built
    data = PolicyDataset(ds, load_recipe("hierarchical"), built.model.cfg, built.processor.image_size,
                         component="low_level_execution")
    state = np.asarray(ds.read_episode(0, ["observation.state"]).column("observation.state").to_pylist(), np.float32)
    item = data[3]  # episode 0, frame 3: "lift the mug", which ends on frame 14
    assert item is not None and item["messages"][-1]["content"] == "lift the mug"
    assert torch.equal(item["goal"], torch.from_numpy(state[14]))


def test_the_goal_reads_the_cameras_and_the_words_not_the_state(world: Path) -> None:
    from policy_helpers import build

    built = build(open_dataset(world), goal_head=True)
    model, proc = built.model.eval(), built.processor
    for p in model.goal.parameters():  # type: ignore[union-attr]  # a head that reads all it is given
        torch.nn.init.normal_(p, std=0.3)
    obs = {"state": np.zeros(4, np.float32), "images": {c: _frames(np.array([0.2, 0.2]), 1)[0] for c in CAMERAS}}

    def goal(observation: dict[str, Any], command: str) -> torch.Tensor:
        inp = proc.observation(observation)
        ids, mask = proc.prompt([[{"role": "user", "content": command}]], generation=False)
        with torch.no_grad():
            enc = model.encode(inp["images"], inp["state"], ids, mask)
        assert enc.goal is not None
        return enc.goal

    base = goal(obs, "lift the mug")
    # The state reaches it nowhere: a gripper elsewhere, the same goal (its shortcut, "near the gripper").
    assert torch.equal(goal({**obs, "state": np.full(4, 0.4, np.float32)}, "lift the mug"), base)
    assert not torch.equal(goal(obs, "set the mug onto the tray"), base)
    moved = {c: _frames(np.array([0.6, 0.5]), 1)[0] for c in CAMERAS}
    assert not torch.equal(goal({**obs, "images": moved}, "lift the mug"), base)


def test_the_default_policy_trains_on_another_world_and_runs_in_steerable_run(world: Path, tmp_path: Path) -> None:
    from steerable.cli.main import main

    # By default a policy with cameras whose state names no object learns where commands end, in a phase
    # of its own first (as many steps as the training's, at most GOAL_PHASE_STEPS); false: no goal head.
    for name, flags in (("default", []), ("without", ["--policy.goal_head", "false"])):
        out = tmp_path / name
        assert main(["train", "--dataset", str(world), "--output_dir", str(out), "--steps", "3", "--batch_size", "4",
                     "--no_progress", "--eval_every", "100", "--goal_pretrain_items", "64", *TINY_FLAGS, *flags]) == 0
        model = load_policy(out).model
        cfg = model.cfg
        assert cfg.goal_head == (not flags) and cfg.objects == {} and cfg.state_keys == ["observation.state"]
        assert (model.goal is not None) == (not flags)
        logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
        phase = [r for r in logs if "goal_pretrain_s" in r]
        assert bool(phase) == (not flags)
        assert all(np.isfinite(r["goal_median"]) for r in phase)
        run = subprocess.run([sys.executable, "-m", "steerable.cli.main", "run", "--env", "sim", "--high_level",
                              "policy", "--low_level", "policy", "--policy.path", str(out), "--eval_episodes", "1",
                              "--max_seconds", "1", "--json"], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        report = json.loads(run.stdout)
        assert report["episodes"] == 1 and report["low_level"] == "policy"


def test_the_action_items_read_the_blend_items_decoded_frames(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One decode per episode and camera for both datasets of a run (each decoded its own before)."""
    import steerable.policy.data as data_module
    from policy_helpers import build

    calls: list[tuple[int, str]] = []
    real = data_module.resized_frames

    def counted(dataset: Any, episode: int, camera: str, *args: Any, **kwargs: Any) -> Any:
        calls.append((episode, camera))
        return real(dataset, episode, camera, *args, **kwargs)

    monkeypatch.setattr(data_module, "resized_frames", counted)
    ds = open_dataset(world)
    built = build(ds, goal_head=True)
    recipe = load_recipe("hierarchical")
    blend = PolicyDataset(ds, recipe, built.model.cfg, built.processor.image_size)
    actions = PolicyDataset(ds, recipe, built.model.cfg, built.processor.image_size, component="low_level_execution",
                            images_from=blend)
    for i in range(len(actions)):
        actions[i]
    for i in range(len(blend)):
        blend[i]
    assert sorted(calls) == sorted({(e.episode_index, c) for e in ds.episodes for c in CAMERAS})
    with pytest.raises(ValueError, match="same dataset"):
        PolicyDataset(ds, recipe, built.model.cfg, built.processor.image_size + 8, images_from=blend)


def test_the_goal_head_benchmark_runs_and_prints_its_result(world: Path) -> None:
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "goal_head.py"
    run = subprocess.run([sys.executable, str(script), "--data", str(world), "--steps", "2", "--train_items", "16",
                          "--eval_items", "16", "--batch_size", "4"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "RESULT image_size=32 steps=2 far_median=" in run.stdout


def test_only_the_rows_that_act_get_a_goal_and_theirs_is_the_same(world: Path) -> None:
    from policy_helpers import batch_of, build

    ds = open_dataset(world)
    built = build(ds, goal_head=True)
    model, proc = built.model.eval(), built.processor
    data = PolicyDataset(ds, load_recipe("hierarchical"), built.model.cfg, proc.image_size)
    inputs = proc.training_batch(batch_of(data, list(range(0, len(data), max(1, len(data) // 12)))))
    acting = inputs["predict_actions"].bool()
    assert acting.any() and not acting.all()  # a blend batch: high-level prompts beside commands
    args = (inputs["images"], inputs["state"], inputs["input_ids"], inputs["attention_mask"])
    with torch.no_grad():
        every, some = model.encode(*args), model.encode(*args, acting=acting)
    assert every.goal is not None and some.goal is not None
    torch.testing.assert_close(some.goal[acting], every.goal[acting], rtol=1e-5, atol=1e-6)
    assert torch.equal(some.goal[~acting], torch.zeros_like(some.goal[~acting]))


def test_the_goal_head_trains_first_then_holds_still_and_a_resumed_run_keeps_it_still(
        world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from safetensors.torch import load_file

    import steerable.policy.goal_training as goal_training
    from steerable.cli.main import main

    seen: dict[str, dict[str, torch.Tensor]] = {}
    real = goal_training.pretrain_goal

    def watched(model: Any, *args: Any, **kwargs: Any) -> Any:
        seen["before"] = {k: v.clone() for k, v in model.goal.state_dict().items()}
        return real(model, *args, **kwargs)

    monkeypatch.setattr(goal_training, "pretrain_goal", watched)

    out = tmp_path / "pre"
    flags = ["train", "--dataset", str(world), "--output_dir", str(out), "--batch_size", "4", "--no_progress",
             "--eval_every", "100", "--save_every", "1", "--policy.goal_head", "true", "--goal_pretrain_steps", "3",
             "--goal_pretrain_items", "64", *TINY_FLAGS]
    assert main([*flags, "--steps", "2"]) == 0
    logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
    assert logs[0]["step"] == 0 and "goal_median" in logs[0] and "goal_pretrain_s" in logs[0]

    def head(step: int) -> dict[str, torch.Tensor]:
        weights = load_file(str(out / "checkpoints" / f"step_{step:08d}" / "model.safetensors"))
        return {k: v for k, v in weights.items() if k.startswith("goal.")}

    first = head(1)
    assert first and any(not torch.equal(first[f"goal.{k}"], v) for k, v in seen["before"].items())  # it learnt
    assert all(torch.equal(v, head(2)[k]) for k, v in first.items())  # then held still
    seen.clear()
    assert main([*flags, "--steps", "3"]) == 0  # resumed: no second phase, still frozen
    assert not seen
    logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
    assert sum(1 for r in logs if "goal_pretrain_s" in r) == 1
    assert all(torch.equal(v, head(3)[k]) for k, v in first.items())


def test_the_goal_phase_keeps_the_weights_that_did_best_on_held_out_episodes(
        world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The phase fits its items or finds the thing by luck of its length (docs/policy.md, "From pixels"): it is
    read on the held-out episodes as it trains, and the policy gets the weights read best, not the last."""
    import functools

    from safetensors.torch import load_file

    import steerable.policy.goal_training as goal_training
    from steerable.cli.main import main

    medians = iter([0.5, 0.2, 0.9])
    snapshots: list[dict[str, torch.Tensor]] = []
    real_errors = goal_training.goal_errors

    def read(head: Any, items: Any, span: Any, far: Any = None) -> dict[str, float]:
        snapshots.append({k: v.clone() for k, v in head.state_dict().items()})
        return {**real_errors(head, items, span, far), "goal_median": next(medians, 0.0)}

    monkeypatch.setattr(goal_training, "goal_errors", read)
    monkeypatch.setattr(goal_training, "pretrain_goal", functools.partial(goal_training.pretrain_goal, check_every=1))
    out = tmp_path / "best"
    assert main(["train", "--dataset", str(world), "--output_dir", str(out), "--batch_size", "4", "--no_progress",
                 "--eval_every", "100", "--save_every", "1", "--steps", "1", "--policy.goal_head", "true",
                 "--goal_pretrain_steps", "3", "--goal_pretrain_items", "64", "--policy.image_shift", "1",
                 *TINY_FLAGS]) == 0
    assert len(snapshots) == 3  # steps 1, 2, 3: the kept weights' errors are step 2's reading, not read again
    assert any(not torch.equal(snapshots[1][k], snapshots[2][k]) for k in snapshots[1])  # it moved after step 2
    kept = load_file(str(out / "checkpoints" / "step_00000001" / "model.safetensors"))
    assert all(torch.equal(kept[f"goal.{k}"], v) for k, v in snapshots[1].items())  # step 2's: the best read
    logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
    assert logs[0]["goal_best_step"] == 2 and logs[0]["goal_median"] == 0.2


def test_the_goal_phase_reads_and_keeps_the_average_of_its_weights_not_the_last_step(
        world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the phase's constant learning rate the last iterate's held-out error wandered from check to check; the
    moving average of the head's weights is what is read and what the policy gets (stop 54)."""
    import functools

    from safetensors.torch import load_file

    import steerable.policy.goal_training as goal_training
    from steerable.cli.main import main

    start: dict[str, torch.Tensor] = {}
    iterates: list[dict[str, torch.Tensor]] = []
    read_weights: list[dict[str, torch.Tensor]] = []
    real_optimizer, real_errors = goal_training._optimizer, goal_training.goal_errors

    def watched_optimizer(head: Any, lr: float) -> torch.optim.Optimizer:
        start.update({k: v.detach().clone() for k, v in head.named_parameters()})
        optimizer = real_optimizer(head, lr)
        step = optimizer.step

        def stepped(*a: Any, **k: Any) -> Any:
            out = step(*a, **k)
            iterates.append({k: v.detach().clone() for k, v in head.named_parameters()})
            return out

        optimizer.step = stepped  # type: ignore[method-assign]
        return optimizer

    def read(head: Any, items: Any, span: Any, far: Any = None) -> dict[str, float]:
        read_weights.append({k: v.detach().clone() for k, v in head.named_parameters()})
        return {**real_errors(head, items, span, far), "goal_median": 1.0 / len(read_weights)}  # the last is best

    monkeypatch.setattr(goal_training, "_optimizer", watched_optimizer)
    monkeypatch.setattr(goal_training, "goal_errors", read)
    monkeypatch.setattr(goal_training, "pretrain_goal", functools.partial(goal_training.pretrain_goal, check_every=1))
    out = tmp_path / "average"
    assert main(["train", "--dataset", str(world), "--output_dir", str(out), "--batch_size", "4", "--no_progress",
                 "--eval_every", "100", "--save_every", "1", "--steps", "1", "--policy.goal_head", "true",
                 "--goal_pretrain_steps", "3", "--goal_pretrain_items", "64", *TINY_FLAGS]) == 0
    assert len(iterates) == len(read_weights) == 3
    keep = 2 / 11  # the average's warm-up at its first step, (1 + 1) / (10 + 1)
    for name, first in iterates[0].items():
        assert torch.allclose(read_weights[0][name], keep * start[name] + (1 - keep) * first, atol=1e-6)
    assert any(not torch.equal(read_weights[2][k], v) for k, v in iterates[2].items())  # not the last step's
    kept = load_file(str(out / "checkpoints" / "step_00000001" / "model.safetensors"))
    assert all(torch.equal(kept[f"goal.{k}"], v) for k, v in read_weights[2].items())


def test_a_policy_with_a_goal_head_reads_no_last_motion_unless_asked(world: Path) -> None:
    """From the cameras the last commanded motion was a shortcut (places let go short; 0.62 against 0.38 without
    it, stop 54): a goal-head policy leaves it out by default, keeps it when asked, and one without a head keeps it."""
    from steerable.policy.setup import dataset_policy_config

    dataset = open_dataset(world)
    assert dataset_policy_config(dataset, {}).motion_input is False
    assert dataset_policy_config(dataset, {"motion_input": None}).motion_input is False  # a flag left unset
    assert dataset_policy_config(dataset, {"motion_input": True}).motion_input is True
    assert dataset_policy_config(dataset, {"goal_head": False}).motion_input is True


def test_the_head_reads_no_pixel_coordinates_and_a_head_from_before_keeps_its_own(world: Path, tmp_path: Path) -> None:
    """Without coordinate channels a feature says what is there, not where (better on new scenes); a
    checkpoint written before the setting existed had them and loads with them, the same head."""
    from steerable.cli.main import main

    out = tmp_path / "old"
    assert main(["train", "--dataset", str(world), "--output_dir", str(out), "--batch_size", "4", "--no_progress",
                 "--eval_every", "100", "--steps", "1", "--policy.goal_head", "true", "--policy.goal_coords", "true",
                 *TINY_FLAGS]) == 0
    where = out / "checkpoints" / "step_00000001"
    config = json.loads((where / "config.json").read_text())
    settings = config.get("policy", config)
    assert settings.pop("goal_coords") is True  # as a checkpoint from before the setting was written
    (where / "config.json").write_text(json.dumps(config))
    old = load_policy(where)
    assert old.model.goal is not None and old.model.goal.trunk[0].in_channels == 5

    from policy_helpers import build

    fresh = build(open_dataset(world), goal_head=True).model
    assert fresh.goal is not None and fresh.goal.trunk[0].in_channels == 3


def test_the_goal_phase_runs_at_its_own_learning_rate(world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    import steerable.policy.goal_training as goal_training
    from steerable.cli.main import main

    seen: dict[str, Any] = {}
    monkeypatch.setattr(goal_training, "pretrain_goal", lambda *a, **k: seen.update(k) or {})
    flags = ["train", "--dataset", str(world), "--batch_size", "4", "--no_progress", "--eval_every", "100",
             "--steps", "1", "--policy.goal_head", "true", "--goal_pretrain_steps", "2", *TINY_FLAGS]
    assert main([*flags, "--output_dir", str(tmp_path / "a")]) == 0 and seen["lr"] == 3e-3
    assert main([*flags, "--output_dir", str(tmp_path / "b"), "--goal_pretrain_lr", "0.01"]) == 0 and seen["lr"] == 0.01
