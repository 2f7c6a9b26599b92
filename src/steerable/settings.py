"""The base of every settings section (`--plan.*`, `--vqa.*`, `--vlm.*`...): one way to report mistakes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from steerable.errors import ConfigError

__all__ = ["Settings", "error_text"]


def error_text(item: Mapping[str, Any]) -> str:
    """The message of one pydantic error, without pydantic's own prefixes ("Value error, ...")."""
    message = str(item.get("msg", ""))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message


class Settings(BaseModel):
    """A pydantic model whose validation errors become one ConfigError line naming each flag.

    Subclasses set `section` (the flag prefix) and `doc` (the page that explains the settings).
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
        parts = []
        for item in error.errors():
            key = ".".join(str(p) for p in item["loc"])
            flag = f"--{cls.section}.{key}" if key else f"--{cls.section}"
            parts.append(f"{flag}: {error_text(item)}")
        hint = f" (see {cls.doc})" if cls.doc else ""
        return ConfigError(f"invalid {cls.section} settings: " + "; ".join(parts) + hint)
