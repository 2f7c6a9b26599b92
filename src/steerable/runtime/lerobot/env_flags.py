"""LeRobot's own flags (`--robot.*`, `--env.*`), read by LeRobot's own config machinery.

A LeRobot user types `--robot.type=so101_follower --robot.port=/dev/ttyACM0 --robot.cameras="{...}"`
or `--env.type=pusht --env.task=PushT-v0`; steerable hands those options, unchanged, to draccus (the
parser LeRobot's scripts use) against LeRobot's choice registries (`RobotConfig`, `EnvConfig`), after
importing what registers their choices: LeRobot's own robots and cameras, and the installed
third-party plugins of the kinds the section needs, found as LeRobot's `register_third_party_plugins`
finds them (distributions named `lerobot_<kind>_*`, imported by that name): `lerobot_robot_*` and
`lerobot_camera_*` for `--robot.*`, `lerobot_env_*` for `--env.*`. Only those: importing every plugin,
as LeRobot's scripts do, imports LeRobot's policies and environments too (steerable's own plugins
bring them): an SO-101's start, up to its connection, took 8.7 s of CPU that way and 3.6 s this way
(33 s and 12 s on a loaded 2-core machine). A mistake (an unknown type or field, a bad value) is one
line that names the flag.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
import importlib.metadata
import io
import json
import logging
import pkgutil
from collections.abc import Mapping
from typing import Any

from steerable.errors import ConfigError, MissingExtraError

__all__ = ["as_flags", "choice_config", "import_plugins", "register_lerobot_choices"]

logger = logging.getLogger(__name__)

# LeRobot's own packages whose subpackages register a section's choices when imported (its recording
# script imports each robot and camera by name; a new one appears here without a change). Its envs
# register on `lerobot.envs.configs`' import.
_CHOICE_PACKAGES = {"robot": ("lerobot.robots", "lerobot.cameras"), "env": ()}
_REGISTERED: set[str] = set()  # the sections whose packages are imported
# The plugin kinds (LeRobot's distribution-name prefixes) each section's choices come from.
_PLUGIN_KINDS = {"robot": ("lerobot_robot_", "lerobot_camera_"), "env": ("lerobot_env_",)}


def import_plugins(prefixes: tuple[str, ...]) -> None:
    """Import each installed distribution whose name starts with one of `prefixes`, by that name, as
    LeRobot's plugin discovery does (each call: one installed since counts too; a second import is
    free). A plugin that fails to import is logged and its choices stay unknown."""
    for dist in importlib.metadata.distributions():
        name = dist.name or ""  # None for a distribution without metadata
        if name.startswith(prefixes):
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001  (a broken plugin: the others still count)
                logger.warning("LeRobot plugin %s does not import: %s: %s", name, type(exc).__name__, exc)


def register_lerobot_choices(section: str) -> None:
    """Import what registers `--<section>.*` choices (see the module docstring): LeRobot's own
    packages once, the installed plugins of its kinds on each call."""
    try:
        importlib.import_module("lerobot")
    except ImportError as exc:
        raise MissingExtraError("lerobot", "lerobot") from exc

    import_plugins(_PLUGIN_KINDS[section])
    if section in _REGISTERED:
        return
    for name in _CHOICE_PACKAGES[section]:
        package = importlib.import_module(name)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.ispkg:
                continue
            try:
                importlib.import_module(f"{name}.{module.name}")
            except Exception as exc:  # a device whose SDK is not installed: its type stays unknown
                logger.debug("skipping %s.%s: %s", name, module.name, exc)
    _REGISTERED.add(section)


def as_flags(section: str, options: Mapping[str, Any]) -> list[str]:
    """`--section.key=value` for each option; a value that is not text (from a YAML file) as JSON."""
    return [f"--{section}.{key}={value if isinstance(value, str) else json.dumps(value)}"
            for key, value in options.items()]


def choice_config(base: Any, section: str, options: Mapping[str, Any]) -> Any:
    """The `base` config (a draccus choice registry: `RobotConfig`, `EnvConfig`) that the
    `--section.*` options describe, parsed as LeRobot's scripts parse them."""
    import draccus

    register_lerobot_choices(section)
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
