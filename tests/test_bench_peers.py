"""The pure pieces of benchmarks/_peers.py and benchmarks/policy_peers.py (issue 36): the budget and name
flags, which checkpoint a budgeted run is scored by, which seeds count, the table, the fixed task's seeds."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


peers = _load("_peers")


@pytest.mark.parametrize(("text", "seconds"), [("30", 30.0), ("30s", 30.0), ("5m", 300.0), ("1.5h", 5400.0),
                                               (" 2min ", 120.0)])
def test_budget_units(text: str, seconds: float) -> None:
    assert peers.parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5", "5d", "five"])
def test_bad_budget_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="budget"):
        peers.parse_budget(text)


def test_names_are_checked() -> None:
    assert peers.parse_names("act, smolvla", ("act", "smolvla", "steerable"), "policies") == ["act", "smolvla"]
    with pytest.raises(ValueError, match="choose from act, steerable"):
        peers.parse_names("act,pi0", ("act", "steerable"), "policies")


def test_bad_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load("policy_peers")
    with pytest.raises(SystemExit) as exit_:
        bench._args(["--out", "/tmp/x", "--budget_s", "soon"])
    assert exit_.value.code == 2
    assert "invalid budget value: 'soon'" in capsys.readouterr().err


def test_newest_complete_checkpoint_is_scored(tmp_path: Path) -> None:
    steer = tmp_path / "steerable" / "checkpoints"
    for step, whole in ((4, True), (12, True), (16, False)):  # 16: stopped while it was written
        where = steer / f"step_{step:08d}"
        where.mkdir(parents=True)
        (where / "config.json").write_text("{}")
        if whole:
            (where / "model.safetensors").write_bytes(b"")
    assert [s for s, _ in peers.steerable_checkpoints(tmp_path / "steerable")] == [4, 12]
    lero = tmp_path / "act" / "checkpoints"
    for step, whole in ((2, True), (10, True), (20, False)):
        (lero / f"{step:06d}" / "pretrained_model").mkdir(parents=True)
        if whole:
            (lero / f"{step:06d}" / "training_state").mkdir()
    (lero / "last").symlink_to(lero / "000010")
    found = peers.lerobot_checkpoints(tmp_path / "act")
    assert [s for s, _ in found] == [2, 10] and found[-1][1].name == "pretrained_model"
    assert peers.lerobot_checkpoints(tmp_path / "none") == []


def test_only_the_chosen_seeds_count() -> None:
    result = peers.score({1000: True, 1001: True, 1003: False, 1004: True}, [1000, 1003, 1004, 1007], 5.0)
    assert (result.successes, result.episodes) == (2, 4)  # 1001 not scored; 1007 never ran: a failure
    assert result.rate == 0.5


def test_seed_blocks() -> None:
    assert peers.seed_blocks([1007, 1000, 1001, 1002, 1005, 1006]) == [(1000, 3), (1005, 3)]
    assert peers.seed_blocks([]) == []


def test_eval_info_by_task_and_seed(tmp_path: Path) -> None:
    info = {"per_task": [  # as lerobot-eval 0.6 writes it: each task's successes in episode order
        {"task_group": "easy", "task_id": 0, "metrics": {"sum_rewards": [1.0, 0.0], "successes": [True, False]}},
        {"task_group": "easy", "task_id": 1, "metrics": {"sum_rewards": [0.0], "successes": [False]}}],
        "overall": {"pc_success": 33.3}}
    (tmp_path / "eval_info.json").write_text(json.dumps(info))
    assert peers.read_eval_info(tmp_path / "eval_info.json", 3) == {"easy:0": {3: True, 4: False}, "easy:1": {3: False}}


def test_table_rows() -> None:
    trained = peers.TrainResult(Path("ckpt"), 150, 31.2, 40.0, stopped=True)
    rows = [peers.Row("steerable", "steerable", peers.Score(3, 10, 1.0), trained, 12.34, peers.Score(0, 10, 1.0)),
            peers.Row("act", "lerobot", None, None, note="reads no language: the floor")]
    table = peers.format_table(rows, same_steps=500).splitlines()
    assert table[0] == ("| policy | evaluated by | success (95 % CI) | train CPU s | steps | ms / chunk | "
                        "success at 500 steps |")
    assert table[2] == ("| steerable | steerable | 3/10 = 0.30 (0.11-0.60) | 31 (budget) | 150 | 12.3 | "
                        "0/10 = 0.00 (0.00-0.28) |")
    assert table[3] == "| act (reads no language: the floor) | lerobot | - | - | - | - | - |"
    assert "success at" not in peers.format_table(rows[:1])


def test_table_training_scenes_column() -> None:
    trained = peers.TrainResult(Path("ckpt"), 150, 31.2, 40.0, stopped=True)
    rows = [peers.Row("steerable", "steerable", peers.Score(0, 20, 1.0), trained, train_scenes=peers.Score(9, 10, 1.0)),
            peers.Row("act", "steerable", peers.Score(1, 20, 1.0), trained)]
    table = peers.format_table(rows, train_scenes=10).splitlines()
    assert table[0].endswith("| ms / chunk | on 10 training scenes |")
    assert table[2].endswith("| 9/10 = 0.90 (0.60-0.98) |")
    assert table[3].endswith("| - |")
    assert "training scenes" not in peers.format_table(rows)


@pytest.mark.parametrize("value", ["-1", "101"])
def test_training_scenes_must_be_trained_on(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load("policy_peers")
    with pytest.raises(SystemExit) as exit_:
        bench._args(["--out", "/tmp/x", "--episodes", "100", "--train_scenes", value])
    assert exit_.value.code == 2
    assert "--train_scenes must be from 0 to --episodes (100)" in capsys.readouterr().err


def test_training_scenes_are_the_recorded_ones() -> None:
    # The column replays the first scenes of the demonstrations, recorded from training_seeds(task, episodes).
    bench = _load("policy_peers")
    task = "put the orange cube in the blue bin"
    assert bench.training_seeds(task, 3) == bench.training_seeds(task, 6)[:3] == bench.fitting_seeds(task, 0, 3)


def test_fixed_task_seeds_fit_the_task() -> None:
    from steerable.synthetic.env import SimEnv

    bench = _load("policy_peers")
    seeds = bench.fitting_seeds("put the orange cube in the blue bin", 1000, 3)
    env = SimEnv(cameras=())
    assert len(seeds) == 3 and seeds == sorted(seeds) and seeds[0] >= 1000
    assert all(env.reset(s, "put the orange cube in the blue bin").steps for s in seeds)
    skipped = [s for s in range(1000, seeds[-1]) if s not in seeds]
    assert all(not env.reset(s, "put the orange cube in the blue bin").steps for s in skipped)


def test_lerobot_train_command() -> None:
    argv = peers.lerobot_train_argv(Path("bin"), "smolvla", Path("/d/data"), Path("/r"), steps=100, save_every=10,
                                    batch_size=4, vlm=Path("/v"))
    assert argv[:2] == ["bin/lerobot-train", "--policy.type=smolvla"]
    assert "--policy.vlm_model_name=/v" in argv and "--save_freq=10" in argv and "--steps=100" in argv
    with pytest.raises(ValueError, match="VLM"):
        peers.lerobot_train_argv(Path("bin"), "smolvla", Path("/d"), Path("/r"), steps=1, save_every=1, batch_size=1)


GROUPS = {"easy": ["reach-v3", "button-press-v3"], "hard": ["push-v3", "pick-place-v3"]}


def test_metaworld_tasks_and_groups() -> None:
    mw = _load("metaworld")
    assert mw.expand_tasks("hard, reach-v3,push-v3", GROUPS) == ["push-v3", "pick-place-v3", "reach-v3"]
    with pytest.raises(ValueError, match="name Meta-World tasks"):
        mw.expand_tasks(" , ", GROUPS)


def test_metaworld_presets(tmp_path: Path) -> None:
    mw = _load("metaworld")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "lerobot-train").write_text("")
    cpu = mw._args(["--out", str(tmp_path), "--lerobot_venv", str(venv)])
    assert (cpu.tasks, cpu.clock, cpu.device, cpu.budget_s) == (mw.DEFAULT_TASKS, "cpu", "cpu", 1200.0)
    assert "reach-v3" not in mw.DEFAULT_TASKS  # no phases: nothing for steerable's policy to learn
    assert cpu.policies == ["steerable", "act", "diffusion"] and cpu.eval_episodes == 10
    gpu = mw._args(["--out", str(tmp_path), "--lerobot_venv", str(venv), "--gpu", "--budget_s", "1h"])
    assert (gpu.tasks, gpu.clock, gpu.device, gpu.budget_s) == ("easy,medium,hard,very_hard", "wall", "cuda", 3600.0)
    assert "smolvla" in gpu.policies
    assert cpu.same_steps == 0
    assert mw._args(["--out", str(tmp_path), "--lerobot_venv", str(venv), "--same_steps", "2400"]).same_steps == 2400
    with pytest.raises(SystemExit):
        mw._args(["--out", str(tmp_path), "--lerobot_venv", str(venv), "--same_steps", "-1"])


def test_metaworld_tables() -> None:
    mw = _load("metaworld")
    scores = {"reach-v3": peers.Score(9, 10, 1.0), "push-v3": peers.Score(1, 10, 2.0)}
    total = mw.pooled(scores)
    assert (total.successes, total.episodes, total.wall_s) == (10, 20, 3.0)
    table = mw.per_task_table(["reach-v3", "push-v3", "door-open-v3"], {"act (lerobot)": scores}).splitlines()
    assert table[0] == "| task | act (lerobot) |"
    assert table[2:] == ["| reach-v3 | 9/10 |", "| push-v3 | 1/10 |", "| door-open-v3 | - |"]


def test_metaworld_language_check(tmp_path: Path) -> None:
    mw = _load("metaworld")
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "info.json").write_text(json.dumps({"features": {"action": {}, "observation.image": {}}}))
    assert not mw.has_language(tmp_path)
    (tmp_path / "meta" / "info.json").write_text(json.dumps({"features": {"language_persistent": {}}}))
    assert mw.has_language(tmp_path)


def test_metaworld_results_are_saved_after_each_policy(tmp_path: Path) -> None:
    mw = _load("metaworld")
    trained = peers.TrainResult(Path("ckpt"), 150, 31.2, 40.0, stopped=True)
    rows = [peers.Row("steerable", "steerable", peers.Score(3, 10, 1.0), trained)]
    columns = {"steerable (steerable)": {"push-v3": peers.Score(3, 10, 1.0)}}
    out = tmp_path / "results.json"
    mw.save_results(out, ["push-v3"], rows, columns)
    first = json.loads(out.read_text(encoding="utf-8"))
    assert [r["policy"] for r in first["rows"]] == ["steerable"]
    assert first["per_task"]["steerable (steerable)"]["push-v3"]["successes"] == 3
    rows.append(peers.Row("act", "steerable", peers.Score(0, 10, 1.0), trained))
    mw.save_results(out, ["push-v3"], rows, columns)
    assert [r["policy"] for r in json.loads(out.read_text(encoding="utf-8"))["rows"]] == ["steerable", "act"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_peers_results_are_saved_after_each_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """policy_peers.py rewrites OUT/results.json after each policy (a run stopped part way keeps what it
    finished); trainings stand in here by runs that saved no checkpoint."""
    bench = _load("policy_peers")
    out, venv = tmp_path / "out", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "lerobot-train").touch()
    seen: list[list[str]] = []

    def train(policy: str, *_: object, **__: object) -> object:
        where = out / "results.json"
        seen.append([r["policy"] for r in json.loads(where.read_text())["language_mix"]] if where.exists() else [])
        return peers.TrainResult(None, 0, 1.0, 1.0, stopped=True)

    monkeypatch.setattr(bench, "train_policy", train)
    monkeypatch.setattr(bench, "_mix_dataset", lambda *_: tmp_path / "data")
    bench.main(["--out", str(out), "--settings", "language_mix", "--policies", "steerable,act",
                "--evaluators", "steerable", "--lerobot_venv", str(venv)])
    assert seen == [[], ["steerable"]]
    rows = json.loads((out / "results.json").read_text())["language_mix"]
    assert [r["policy"] for r in rows] == ["steerable", "act"] and "no checkpoint" in rows[0]["note"]
