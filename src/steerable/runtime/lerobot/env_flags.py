"""LeRobot's own flags (`--robot.*`, `--env.*`), read by LeRobot's own config machinery.

A LeRobot user types `--robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.cameras="{...}"`
or `--env.type=pusht --env.task=PushT-v0`; steerable hands those options, unchanged, to draccus (the
parser LeRobot's scripts use) against LeRobot's choice registries (`RobotConfig`, `EnvConfig`), after
importing what registers their choices: LeRobot's own robots and cameras, and every installed
third-party plugin (`lerobot_robot_*`, `lerobot_camera_*`, `lerobot_env_*`...), through LeRobot's
`register_third_party_plugins`. A mistake (an unknown type or field, a bad value) is one line that
names the flag.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
import io
import json
import logging
import pkgutil
from collections.abc import Mapping
from typing import Any

from steerable.errors import ConfigError, MissingExtraError

__all__ = ["as_flags", "choice_config", "register_lerobot_choices"]

logger = logging.getLogger(__name__)

_REGISTERED = False
# LeRobot's own packages whose subpackages register robot and camera choices when imported (its
# recording script imports each of them by name; a new one appears here without a change).
_CHOICE_PACKAGES = ("lerobot.robots", "lerobot.cameras")


def register_lerobot_choices() -> None:
    """Import every robot and camera LeRobot ships (once), and every installed LeRobot plugin (each
    time: one installed since, or put on the path since, counts too; importing one twice is free)."""
    global _REGISTERED
    try:
        from lerobot.utils.import_utils import register_third_party_plugins
    except ImportError as exc:
        raise MissingExtraError("lerobot", "lerobot") from exc

    register_third_party_plugins()
    if _REGISTERED:
        return
    for name in _CHOICE_PACKAGES:
        package = importlib.import_module(name)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.ispkg:
                continue
            try:
                importlib.import_module(f"{name}.{module.name}")
            except Exception as exc:  # a device whose SDK is not installed: its type stays unknown
                logger.debug("skipping %s.%s: %s", name, module.name, exc)
    _REGISTERED = True


def as_flags(section: str, options: Mapping[str, Any]) -> list[str]:
    """`--section.key=value` for each option; a value that is not text (from a YAML file) as JSON."""
    return [f"--{section}.{key}={value if isinstance(value, str) else json.dumps(value)}"
            for key, value in options.items()]


def choice_config(base: Any, section: str, options: Mapping[str, Any]) -> Any:
    """The `base` config (a draccus choice registry: `RobotConfig`, `EnvConfig`) that the
    `--section.*` options describe, parsed as LeRobot's scripts parse them."""
    import draccus

    register_lerobot_choices()
    known = base.get_known_choices()
    kind = options.get("type")
    if not kind:
        raise ConfigError(f"--{section}.type is missing: choose one of {', '.join(sorted(known))}")
    if kind not in known:
        close = difflib.get_close_matches(str(kind), list(known), n=1)
        hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted(known))}"
        raise ConfigError(f"--{section}.type={kind}: LeRobot knows no such {section} ({hint}; a plugin is found "
                          f"when its distribution is installed and named lerobot_{section}_*)")
    chosen = known[kind]
    fields = {f.name for f in dataclasses.fields(chosen) if f.init}
    for key in options:
        head = str(key).split(".", 1)[0]
        if key != "type" and head not in fields:
            close = difflib.get_close_matches(head, sorted(fields), n=1)
            hint = f"did you mean --{section}.{close[0]}?" if close else f"its fields: {', '.join(sorted(fields))}"
            raise ConfigError(f"--{section}.{key}: a {kind} {section} has no field {head} ({hint})")
    wrapper = dataclasses.make_dataclass("SteerableFlags", [(section, base)])
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(errors):
            parsed = draccus.parse(wrapper, args=as_flags(section, options), exit_on_error=False)
    except SystemExit as exc:  # argparse's own report, on stderr
        lines = [line for line in errors.getvalue().splitlines() if "error:" in line]
        problem = lines[-1].split("error:", 1)[1].strip() if lines else f"exit {exc.code}"
        raise ConfigError(f"--{section}.*: {problem}") from None
    except Exception as exc:  # draccus' decoding errors, a config's own __post_init__ checks
        text = " ".join(str(getattr(exc, "message", None) or exc).split()) or type(exc).__name__
        raise ConfigError(f"--{section}.* ({kind}): {text}") from exc
    return getattr(parsed, section)
