"""`steerable train` as a user runs it: a real subprocess, resumable after SIGKILL, bad input, the Hub."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from policy_helpers import TINY, TINY_FLAGS, one_thread  # noqa: F401  (autouse fixture)
from train_data import annotate_synthetic

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("train_cli") / "ds"
    annotate_synthetic(root, episodes=3)
    return root


def _cmd(dataset: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "steerable.cli.main", "train", "--dataset", str(dataset), "--output_dir", str(out),
            "--batch_size", "4", "--no_progress", *TINY_FLAGS, *extra]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=110)


def test_train_writes_checkpoints_logs_and_reports(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _run(_cmd(dataset, out, "--steps", "6", "--save_every", "3", "--eval_every", "3"))
    assert result.returncode == 0, result.stderr
    assert "trained 6 steps" in result.stdout and "held-out: text exact match" in result.stdout
    final = out / "checkpoints" / "step_00000006"
    names = {p.name for p in final.iterdir()}
    assert {"model.safetensors", "config.json", "recipe.yaml", "stats.json", "tokenizer", "trainer_state.json",
            "optimizer.safetensors"} <= names
    assert "low_level_execution" in (final / "recipe.yaml").read_text()
    logs = (out / "logs.jsonl").read_text().splitlines()
    assert any('"eval": true' in line and "eval_exact_match" in line for line in logs)


def test_a_run_killed_mid_way_resumes_from_its_last_checkpoint(dataset: Path, tmp_path: Path) -> None:
    args = ("--steps", "12", "--save_every", "3", "--eval_every", "100", "--ema_decay", "0.9")
    straight = _run(_cmd(dataset, tmp_path / "straight", *args))
    assert straight.returncode == 0, straight.stderr

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(dataset, killed, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    deadline = time.monotonic() + 100
    while not (killed / "checkpoints" / "step_00000003").is_dir():
        assert proc.poll() is None, "training ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "checkpoints" / "step_00000012").exists()

    resumed = _run(_cmd(dataset, killed, *args))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "trained 12 steps" in resumed.stdout
    # Same data order, RNG, optimizer state and weight average: the resumed run ends with the same
    # averaged weights (what the checkpoint runs with) and the same weights under them.
    for name in ("model.safetensors", "training_weights.safetensors"):
        a = load_file(str(tmp_path / "straight" / "checkpoints" / "step_00000012" / name))
        b = load_file(str(killed / "checkpoints" / "step_00000012" / name))
        assert a.keys() == b.keys()
        assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    average = load_file(str(killed / "checkpoints" / "step_00000012" / "model.safetensors"))
    shared = b.keys() & average.keys()
    assert len(shared) > 10 and any(not torch.equal(average[k], b[k]) for k in shared)  # it runs with the average


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy.state_mode", "words"], "state_mode"),
        (["--device", "cuda"], "cuda"),
        (["--steps", "0"], "--steps"),
        (["--policy.state_key", "joints"], "no state feature 'joints'"),
        (["--recipe", "nope"], "no built-in recipe"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(dataset: Path, tmp_path: Path, extra: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from steerable.cli.main import main

    if extra == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    assert main(_cmd(dataset, tmp_path / "o", *extra)[3:]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_missing_dataset_is_one_line_from_a_subprocess(tmp_path: Path) -> None:
    result = _run(_cmd(tmp_path / "absent", tmp_path / "o"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


class FakeHub:
    """Stands in for huggingface_hub.HfApi (a class, as transformers annotates with it at import)."""

    calls: list[tuple[str, dict[str, Any]]] = []

    def create_repo(self, repo_id: str, **kw: Any) -> None:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kw}))

    def upload_folder(self, **kw: Any) -> Any:
        self.calls.append(("upload_folder", kw))
        return SimpleNamespace(commit_url="https://hub.invalid/me/policy/commit/1")


def test_push_to_hub_uploads_the_final_checkpoint(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from steerable.cli.main import main

    hub = FakeHub
    hub.calls = []
    monkeypatch.setattr("huggingface_hub.HfApi", FakeHub)
    code = main(["train", "--dataset", str(dataset), "--output_dir", str(tmp_path / "o"), "--steps", "2",
                 "--batch_size", "4", "--no_progress", "--push_to_hub", "me/policy", *TINY_FLAGS])
    assert code == 0
    assert hub.calls[0] == ("create_repo", {"repo_id": "me/policy", "repo_type": "model", "private": False,
                                            "exist_ok": True})
    upload = hub.calls[1][1]
    folder = Path(upload["folder_path"])
    assert folder.name == "step_00000002" and upload["repo_type"] == "model"
    assert "optimizer.safetensors" in upload["ignore_patterns"]
    assert "steerable run" in (folder / "README.md").read_text()
    assert "pushed to https://hub.invalid/me/policy/commit/1" in capsys.readouterr().out


def test_backbone_from_a_local_folder(dataset: Path, tmp_path: Path) -> None:
    from steerable.dataset import open_dataset
    from steerable.policy.setup import build_fresh
    from steerable.policy.tokenizer import build_tiny_tokenizer

    tiny = build_fresh(open_dataset(dataset), dict(TINY), eval_fraction=0.0, seed=0)
    folder = tmp_path / "smolvlm-like"
    tiny.model.backbone.vlm.save_pretrained(str(folder))
    build_tiny_tokenizer(["pick up the cube"], 300).save_pretrained(str(folder))
    out = tmp_path / "o"
    result = _run(_cmd(dataset, out, "--steps", "2", f"--policy.backbone={folder}"))
    assert result.returncode == 0, result.stderr
    assert str(folder) in (out / "checkpoints" / "step_00000002" / "config.json").read_text()


def test_a_yaml_config_sets_the_run_and_flags_given_too_win(dataset: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from steerable.cli.main import main

    out = tmp_path / "o"
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"dataset": str(dataset), "output_dir": str(out), "steps": 50, "batch_size": 4,
                                      "progress": False, "eval_every": 100, "policy": {**TINY, "chunk_size": 6}}))
    assert main(["train", "--config", str(config), "--steps", "2", "--policy.n_action_steps=3"]) == 0
    assert "trained 2 steps" in capsys.readouterr().out
    saved = json.loads((out / "checkpoints" / "step_00000002" / "config.json").read_text())
    policy = saved  # format 2: the settings at the top level, beside LeRobot's `type`
    assert saved["type"] == "steerable_hierarchical" and saved["format"] == 2
    assert policy["chunk_size"] == 6 and policy["n_action_steps"] == 3 and policy["tiny_hidden"] == TINY["tiny_hidden"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stpes", "3"], "unknown option --stpes (did you mean --steps?)"),
        (["--policy.chunk_sise", "3"], "unknown option --policy.chunk_sise (did you mean --policy.chunk_size?)"),
        (["--polcy.backbone", "tiny"], "(did you mean --policy.backbone?)"),
        (["--no_progres"], "(did you mean --no_progress?)"),
    ],
)
def test_an_unknown_flag_is_one_line_with_a_suggestion(tmp_path: Path, argv: list[str], message: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from steerable.cli.main import main

    assert main(["train", "--dataset", str(tmp_path), "--output_dir", str(tmp_path / "o"), *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_a_config_file_with_an_unknown_key_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from steerable.cli.main import main

    config = tmp_path / "train.yaml"
    config.write_text("dataset: d\noutput_dir: o\npolicy:\n  backbnoe: tiny\n")
    assert main(["train", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "unknown key policy.backbnoe (did you mean policy.backbone?)" in err and len(err.strip().splitlines()) == 1


def test_help_lists_every_flag_without_importing_torch() -> None:
    from steerable.cli.flags import iter_flags
    from steerable.policy.settings import TrainSettings

    code = ("import sys\nfrom steerable.cli.main import main\nmain(['train', '--help'])\n"
            "print('heavy:', [m for m in ('torch', 'numpy', 'pyarrow', 'PIL') if m in sys.modules])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith("heavy: []"), result.stdout[-300:]
    for name, _, _, doc in iter_flags(TrainSettings):
        assert f"\n  --{name}" in result.stdout and doc, name
    for spelling in ("--no_progress", "--dataset (required)", "--policy.backbone=tiny", "--config FILE.yaml"):
        assert spelling in result.stdout


def test_episodes_picks_what_is_trained_and_held_out(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "two"
    result = _run(_cmd(dataset, out, "--steps", "2", "--save_every", "2", "--eval_every", "100",
                       "--episodes", "0-1", "--eval_fraction", "0.5"))
    assert result.returncode == 0, result.stderr
    state = json.loads((out / "checkpoints" / "step_00000002" / "trainer_state.json").read_text())
    assert sorted(state["train_episodes"] + state["eval_episodes"]) == [0, 1]
    assert state["eval_episodes"] and state["train_episodes"]


def test_episodes_the_dataset_lacks_are_one_line(dataset: Path, tmp_path: Path) -> None:
    result = _run(_cmd(dataset, tmp_path / "bad", "--steps", "2", "--episodes", "1,7"))
    assert result.returncode == 2
    assert "--episodes [7]: not in the dataset" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
