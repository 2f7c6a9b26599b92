"""The base of every settings section (`--plan.*`, `--vqa.*`, `--vlm.*`...): one way to report mistakes.

Also the value types several commands' settings share, defined here as every settings layer reads them:
`Episodes`, the episode indices and ranges (`0,3,7-9`) that annotate, train, run, view, render and export pick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, ValidationError

from steerable.errors import ConfigError

__all__ = ["Episodes", "Settings", "check_choice", "describe", "episodes_field", "error_text", "parse_episodes"]


def check_choice(flag: str, value: object, choices: Sequence[str]) -> None:
    """Raise the one-line ConfigError of a `flag` given a value not among `choices` (every "choose one of")."""
    if value not in choices:
        raise ConfigError(f"{flag} {value!r}: choose one of {', '.join(choices)}")


def parse_episodes(text: str | None, flag: str = "--episodes") -> list[int] | None:
    """`0,3,7-9` -> [0, 3, 7, 8, 9]; None stays None (every episode)."""
    if text is None:
        return None
    out: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            first, last = int(lo), int(hi) if dash else int(lo)
            if first < 0 or last < first:
                raise ValueError(part)
            out.extend(range(first, last + 1))
    except ValueError:
        raise ConfigError(f"{flag} takes episode indices and ranges like 0,3,7-9, got {text!r}") from None
    if not out:
        raise ConfigError(f"{flag} names no episode: {text!r}")
    return list(dict.fromkeys(out))


def _episodes(value: Any) -> list[int] | None:
    """A flag's text, a config file's list or number: the episode indices."""
    if value is None or value == []:
        return None
    items = value if isinstance(value, list | tuple) else [value]
    return parse_episodes(",".join(str(v) for v in items))


# Episode indices and ranges (`0,3,7-9`); None: every episode.
Episodes = Annotated[list[int] | None, BeforeValidator(_episodes)]


def episodes_field(description: str = "only these episodes: indices and ranges, e.g. 0,3,7-9") -> Any:
    """An `Episodes` field read from `--episodes` or `--only_episodes`, whichever of the two names it has."""
    return Field(None, validation_alias=AliasChoices("episodes", "only_episodes"), description=description)


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
    page that explains the settings); a command's own settings may set `positional` and `pass_through`.
    """

    section: ClassVar[str] = ""
    doc: ClassVar[str | None] = None
    # A command's settings: the fields its bare words fill, in order (`steerable annotate DATASET`), and the flag
    # sections passed through as typed into a dict field (`--env.type=pusht` -> env_options), section: field.
    positional: ClassVar[tuple[str, ...]] = ()
    pass_through: ClassVar[dict[str, str]] = {}

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
