"""The runtime's seams (#38): one-way imports inside runtime/, no simulator behind the contract, typed stack."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

import steerable.runtime
from steerable.control import (
    Observation,
    ProvidesEnvironmentState,
    RecordedEpisode,
    RecordsGroundTruth,
)
from steerable.errors import ConfigError
from steerable.runtime.events import RuntimeEvent
from steerable.runtime.recording import Recorder

RUNTIME = Path(steerable.runtime.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every steerable module `path` imports, wherever (function bodies and TYPE_CHECKING blocks too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("steerable.")}


def _runtime_modules() -> dict[str, Path]:
    return {"steerable." + ".".join(p.relative_to(RUNTIME.parent).with_suffix("").parts): p
            for p in RUNTIME.rglob("*.py") if p.name != "__init__.py"}


def test_no_two_runtime_modules_import_each_other() -> None:
    modules = _runtime_modules()
    edges = {name: _imports(path) & modules.keys() for name, path in modules.items()}
    pairs = sorted({tuple(sorted((a, b))) for a, targets in edges.items() for b in targets if a in edges[b]})
    assert pairs == []


def test_runtime_imports_neither_the_simulator_nor_another_module_s_private_names() -> None:
    for name, path in _runtime_modules().items():
        imported = _imports(path)
        assert not [m for m in imported if m.startswith("steerable.synthetic")], name
        private = [m for m in imported if m.rpartition(".")[2].startswith("_") and not m.endswith("__")]
        assert private == [], (name, private)


def test_each_stack_kind_is_one_literal_that_the_settings_the_checks_and_the_help_read() -> None:
    from typing import get_args, get_type_hints

    from steerable.cli.flags import flag_help
    from steerable.runtime.settings import RunSettings
    from steerable.runtime.stack import HighKind, LeRobotOptions, LowKind, ObservationKind, StackSpec

    hints = get_type_hints(StackSpec)
    assert (hints["high_level"], hints["low_level"], hints["observation"]) == (HighKind, LowKind, ObservationKind)
    assert hints["lerobot"] is LeRobotOptions
    fields = RunSettings.model_fields
    assert (fields["high_level"].annotation, fields["low_level"].annotation,
            fields["observation"].annotation) == (HighKind, LowKind, ObservationKind)
    shown = flag_help(RunSettings)
    for kind in (HighKind, LowKind, ObservationKind):
        assert " | ".join(get_args(kind)) in shown
    # One check, one message, whichever way the stack is built.
    with pytest.raises(ConfigError, match=r"--low_level 'oracle': choose one of scripted, policy, lerobot$"):
        RunSettings(low_level="oracle")
    with pytest.raises(ConfigError, match=r"--low_level 'oracle': choose one of scripted, policy, lerobot$"):
        StackSpec(low_level=cast(Any, "oracle"))
    lerobot = RunSettings(low_level="lerobot", lerobot={"policy_path": "dir", "device": "cuda"}).stack().lerobot
    assert lerobot == LeRobotOptions("dir", "cuda", None)


def test_the_simulator_provides_its_environment_state_and_ground_truth_through_the_contract() -> None:
    from steerable.synthetic.env import SimEnv
    from steerable.synthetic.privileged import ENVIRONMENT_STATE_NAMES, environment_state

    env = SimEnv(cameras=("wrist",))
    env.reset(seed=3)
    assert isinstance(env, ProvidesEnvironmentState) and isinstance(env, RecordsGroundTruth)
    assert env.environment_state_names == ENVIRONMENT_STATE_NAMES
    obs = env.observe(render=False)
    assert obs.environment_state is not None
    assert np.array_equal(obs.environment_state, environment_state(env.world))
    assert env.frame_truth(obs) is obs.privileged


class _Truths:
    """An environment's ground truth that is not the simulator's: the runtime records it all the same."""

    def __init__(self) -> None:
        self.written: list[tuple[Path, int, list[RecordedEpisode]]] = []

    def frame_truth(self, observation: Observation) -> object | None:
        return float(observation.state[0])

    def write_ground_truth(self, root: Path, fps: int, episodes: Sequence[RecordedEpisode]) -> None:
        self.written.append((root, fps, list(episodes)))


def _record(root: Path, truth: RecordsGroundTruth | None) -> Path | None:
    recorder = Recorder(root, fps=10, truth=truth, wait=True)
    recorder.on_event(RuntimeEvent("task", "pick up the cube", 0, 0.0))
    recorder.on_event(RuntimeEvent("subtask", "reach the cube", 1, 0.1))
    for i in range(3):
        recorder.on_frame(Observation(state=np.full(2, i, np.float32)), np.zeros(2, np.float32))
    return recorder.close()


def test_a_recording_asks_the_environment_for_its_ground_truth(tmp_path: Path) -> None:
    truths = _Truths()
    assert _record(tmp_path / "rec", truths) == tmp_path / "rec"
    [(_, fps, [episode])] = truths.written
    assert fps == 10 and (episode.index, episode.task) == (0, "pick up the cube")
    assert list(episode.truths) == [0.0, 1.0, 2.0] and len(episode.times) == 3
    # Before the first subtask the robot was already at it (as the recorder always wrote it).
    assert list(episode.subtask_starts) == [(0, "reach the cube"), (1, "reach the cube")]
    # An environment without ground truth (a robot): the recording is the dataset alone.
    assert _record(tmp_path / "plain", None) == tmp_path / "plain"
    assert not (tmp_path / "plain" / "meta" / "steerable_ground_truth.json").exists()


def test_the_runtime_s_stand_ins_in_the_tests_need_no_type_ignore() -> None:
    """A policy runner's stand-in is a `TextPolicy`, an env's a `Body`, a controller's a
    `LowLevelController`: handing one to the runtime type-checks as it is."""
    tests = Path(__file__).parent
    built = ("PolicyHighLevel(", "Runtime(", "PolicyServer(", "rt.low.", "low.runner.")
    flagged = [f"{path.name}:{number}" for path in sorted(tests.glob("test_*.py"))
               for number, line in enumerate(path.read_text().splitlines(), 1)
               if "type: ignore" in line and any(call in line for call in built)]
    assert flagged == []


def test_run_s_vlm_settings_are_annotate_s_vlm_config_in_run_s_spellings() -> None:
    from typing import get_type_hints

    from steerable.runtime.settings import RunSettings
    from steerable.runtime.stack import StackSpec
    from steerable.vlm.config import VLMConfig

    assert RunSettings.model_fields["vlm"].annotation is VLMConfig
    assert get_type_hints(StackSpec)["vlm"] == VLMConfig | None
    run = RunSettings(high_level="vlm", vlm={"base_url": "http://127.0.0.1:9/v1", "model_id": "m", "timeout_s": 5})
    vlm = run.stack().vlm
    assert vlm is not None
    assert (vlm.base_url, vlm.model_id, vlm.request_timeout_s) == (["http://127.0.0.1:9/v1"], "m", 5)
    with pytest.raises(ConfigError, match="--high_level vlm needs --vlm.base_url"):
        StackSpec(high_level="vlm")
