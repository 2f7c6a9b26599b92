"""The one registry of environments: a name (`steerable run --env NAME`) for each factory.

A factory is a callable (an `Environment` class, usually) taking `fps=` and its own keyword
options, or the "module:attribute" path of one, imported when the environment is first built
(so listing the names stays cheap). Options are the factory's keyword parameters: the run's
`--camera_shapes` and `--eval_difficulty` reach `sim` that way, and an option a factory does not
take is refused by name. Adding an environment is one module with its class and one line here:

    ENVIRONMENTS["toy"] = "my_package.toy_env:ToyEnv"

The entries:
- `sim`: the synthetic tabletop (`steerable.synthetic.env.SimEnv`);
- `robot`: any robot LeRobot knows, its own and installed `lerobot_robot_*` plugins, built from
  LeRobot's own `--robot.*` flags (`--robot.type=so101_follower --robot.port=... --robot.id=...`; a
  `--robot.*` flag alone picks this entry); every target bounded per step, disconnected on every
  way out (`steerable.runtime.lerobot.robot`);
- `lerobot`: LeRobot's gym simulators (PushT, ALOHA, MetaWorld, LIBERO, `lerobot_env_*` plugins)
  through LeRobot's `make_env`, from its `--env.*` flags (`--env.type=pusht`;
  `steerable.runtime.lerobot.gym_env`).
Both LeRobot entries need the `lerobot` extra (Python >= 3.12). Options a command line gives as
`--env.KEY=VALUE` reach the factory of the chosen entry as they are (text); `--robot.*` reach
`robot` as its `robot` option.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any

from steerable.errors import ConfigError

if TYPE_CHECKING:
    from steerable.control import Environment

__all__ = ["ENVIRONMENTS", "EnvSpec", "environment_options", "make_env"]

Factory = Callable[..., "Environment"]

ENVIRONMENTS: dict[str, str | Factory] = {
    "sim": "steerable.synthetic.env:SimEnv",
    "robot": "steerable.runtime.lerobot.robot:robot_environment",
    "lerobot": "steerable.runtime.lerobot.gym_env:gym_environment",
}


@dataclass(frozen=True)
class EnvSpec:
    """Which environment to build, and its options (plain data: evaluation workers rebuild it)."""

    name: str = "sim"
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in ENVIRONMENTS:
            raise ConfigError(f"--env {self.name!r}: choose one of {', '.join(ENVIRONMENTS)}")


def _factory(name: str) -> Factory:
    entry = ENVIRONMENTS[name]
    if not isinstance(entry, str):
        return entry
    module, _, attribute = entry.partition(":")
    found: Factory = getattr(import_module(module), attribute)
    return found


def environment_options(spec: EnvSpec) -> dict[str, Any]:
    """Every keyword option of the environment's factory: its default, or the value `spec` sets."""
    params = inspect.signature(_factory(spec.name)).parameters
    accepted = {
        n: p.default for n, p in params.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n != "fps"
    }
    unknown = sorted(set(spec.options) - set(accepted))
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        takes = ", ".join(sorted(accepted)) or "none"
        raise ConfigError(f"--env {spec.name} has no option {', '.join(unknown)} (its options: {takes})")
    return {**accepted, **spec.options}


def make_env(spec: EnvSpec, fps: int) -> Environment:
    """A new environment `spec` names, stepping at `fps`; its options checked against the factory's."""
    environment_options(spec)
    env: Environment = _factory(spec.name)(fps=fps, **spec.options)
    return env
