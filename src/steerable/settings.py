"""The base of every settings section (`--plan.*`, `--vqa.*`, `--vlm.*`...): one way to report mistakes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from steerable.errors import ConfigError

__all__ = ["Settings", "describe", "error_text"]


def error_text(item: Mapping[str, Any]) -> str:
    """The message of one pydantic error, without pydantic's own prefixes ("Value error, ...")."""
    message = str(item.get("msg", ""))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message


def describe(error: ValidationError, *, prefix: str = "", title: str = "invalid configuration", hint: str = "") -> str:
    """One line for every problem, each naming its flag (`--<prefix><field>`).

    A validator that raised a ConfigError named its flags already: its message is kept as it is.
    """
    own: list[str] = []
    problems: list[str] = []
    for item in error.errors():
        inner = (item.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError):
            own.append(str(inner))
            continue
        key = prefix + ".".join(str(p) for p in item["loc"])
        flag = f"--{key.rstrip('.')}" if key else ""
        if item["type"] == "missing":
            problems.append(f"{flag} is required")
        else:
            problems.append(f"{flag}: {error_text(item)}" if flag else error_text(item))
    if problems:
        own.append(f"{title}: " + "; ".join(problems) + hint)
    return "; ".join(own)


class Settings(BaseModel):
    """A pydantic model whose validation errors become one ConfigError line naming each flag.

    Subclasses set `section` (the flag prefix; "" for a command's top-level flags) and `doc` (the
    page that explains the settings).
    """

    section: ClassVar[str] = ""
    doc: ClassVar[str | None] = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise self.config_error(error) from error

    @classmethod
    def config_error(cls, error: ValidationError) -> ConfigError:
        prefix = f"{cls.section}." if cls.section else ""
        title = f"invalid {cls.section} settings" if cls.section else "invalid settings"
        hint = f" (see {cls.doc})" if cls.doc else ""
        return ConfigError(describe(error, prefix=prefix, title=title, hint=hint))
