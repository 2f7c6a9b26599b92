"""Meta-World's tasks as LeRobot's Meta-World env names and describes them.

The task names, their description texts (what LeRobot's env hands a policy as its task), their
difficulty groups and the scripted policy of each are read from the table the installed `lerobot`
ships beside its env (`lerobot/envs/metaworld_config.json`), by file, without importing `lerobot`:
a recording's task strings are then exactly the ones `lerobot-eval --env.type=metaworld` and
`steerable run --env lerobot --env.type=metaworld` give the policy, whatever LeRobot's version.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from steerable.errors import ConfigError, MissingExtraError

__all__ = ["INSTALL_HINT", "MetaWorldTasks", "load_tasks"]

# What a recording needs installed, in one line (docs/metaworld.md: why mujoco is pinned).
INSTALL_HINT = "pip install 'steerable[metaworld]' (lerobot[metaworld] and mujoco<3.3)"
_TABLE = Path("envs") / "metaworld_config.json"
_PREFIX = "metaworld-"  # LeRobot's env accepts task names with it and drops it


@dataclass(frozen=True)
class MetaWorldTasks:
    """LeRobot's Meta-World table: task -> description, task -> scripted policy class name, group -> tasks."""

    descriptions: dict[str, str]
    policies: dict[str, str]
    groups: dict[str, list[str]]

    def expand(self, text: str) -> list[str]:
        """Task names from a comma-separated list of task names and group names (easy, medium, hard,
        very_hard), in order, each once; a name LeRobot does not know is one line with the closest."""
        names: list[str] = []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name = part[len(_PREFIX):] if part.startswith(_PREFIX) else part
            for task in self.groups.get(name, [name]):
                if task not in self.descriptions:
                    close = difflib.get_close_matches(task, [*self.descriptions, *self.groups], n=1)
                    hint = f"did you mean {close[0]}?" if close else "e.g. reach-v3, push-v3, or a group: easy"
                    raise ConfigError(f"--tasks: LeRobot's Meta-World env has no task {task!r} ({hint})")
                if task not in names:
                    names.append(task)
        if not names:
            raise ConfigError("--tasks is empty: name Meta-World tasks (e.g. reach-v3,push-v3) or a group (easy)")
        return names


def load_tasks() -> MetaWorldTasks:
    """The table of the installed `lerobot` (a missing `lerobot` is one line saying what to install)."""
    spec = importlib.util.find_spec("lerobot")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError("lerobot", "metaworld")
    path = Path(next(iter(spec.submodule_search_locations))) / _TABLE
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
        return MetaWorldTasks(dict(table["TASK_DESCRIPTIONS"]), dict(table["TASK_POLICY_MAPPING"]),
                              {k: list(v) for k, v in table["DIFFICULTY_TO_TASKS"].items()})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"LeRobot's Meta-World task table {path} is missing or not as expected ({exc}); "
                          f"{INSTALL_HINT}") from exc
