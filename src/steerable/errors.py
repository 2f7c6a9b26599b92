"""The error hierarchy. Every failure a user can cause or fix is a `SteerableError`.

Leaves also inherit the builtin they resemble, so `except FileNotFoundError` keeps working.
The CLI prints `str(error)` as one line and exits with status 2; messages say what to do next.

The tree (builtins a class also inherits in parentheses; `[module]`: defined there, not here):

SteerableError
    AnnotationError
    ClipStopped  [viewer.clips]
    CommandError(ValueError)
    ConfigError(ValueError)
    ControllerUnavailableError(ConnectionError)
    DatasetError
        CorruptDatasetError(ValueError)
        DatasetNotFoundError(FileNotFoundError)
        UnsupportedDatasetVersionError(ValueError)
        VideoError
            VideoNotFoundError(FileNotFoundError)
    HubError
    LanguageSchemaError(ValueError)
        LanguageRowTypeError(TypeError)
    MissingExtraError(ImportError)
    MissingFilesystemError(ImportError)  [annotate.staging]
    RecipeError(ValueError)
        RecipeFieldError  [recipes._where]
    RunLockedError  [dataset.lock]
    VLMError
        AttemptError  [vlm.retry]
        ReplyParseError(ValueError)  [vlm.jsonrepair]
        VLMReplyError
        VLMUnavailableError(ConnectionError)
    WorkersLost  [distributed.ray_executor]
    WriteError(OSError)

`tests/test_error_tree.py` checks this drawing against the code.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence

__all__ = [
    "AnnotationError",
    "CommandError",
    "ConfigError",
    "ControllerUnavailableError",
    "CorruptDatasetError",
    "DatasetError",
    "DatasetNotFoundError",
    "HubError",
    "LanguageRowTypeError",
    "LanguageSchemaError",
    "MissingExtraError",
    "RecipeError",
    "SteerableError",
    "UnsupportedDatasetVersionError",
    "VideoError",
    "VideoNotFoundError",
    "VLMError",
    "VLMReplyError",
    "VLMUnavailableError",
    "WriteError",
    "explain_os_error",
    "os_cause",
    "with_article",
]


class SteerableError(Exception):
    """Root of every error steerable raises on purpose."""


class DatasetError(SteerableError):
    """A dataset cannot be read or does not follow the LeRobot v3 layout."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The dataset root, or a file it must contain, does not exist."""


class UnsupportedDatasetVersionError(DatasetError, ValueError):
    """The dataset uses a codebase version steerable does not read (e.g. v2.1)."""


class CorruptDatasetError(DatasetError, ValueError):
    """A file of the dataset exists but cannot be parsed, or disagrees with the metadata."""


class VideoError(DatasetError):
    """A video file cannot be decoded, or lacks the frames asked for."""


class VideoNotFoundError(VideoError, FileNotFoundError):
    """An episode's video file is missing."""


class LanguageSchemaError(SteerableError, ValueError):
    """Language rows break the schema (unknown style, camera rule, off-frame event time...).

    `problems`: every broken rule, one line each, for callers that list them (the editor's reply); the
    message says the same in words. Not given, the message is the one problem.
    """

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)


class LanguageRowTypeError(LanguageSchemaError, TypeError):
    """A language row is not a dict (the reference raises TypeError for it, so this is one too)."""


class WriteError(SteerableError, OSError):
    """Writing a dataset file failed; the previous version of the file is intact."""


class RecipeError(SteerableError, ValueError):
    """A recipe is malformed or cannot be rendered; the message names file, line and key."""


class ConfigError(SteerableError, ValueError):
    """A configuration value or combination of values is invalid."""


class CommandError(SteerableError, ValueError):
    """A robot command or task outside the environment's grammar, or naming what its scene lacks."""


class ControllerUnavailableError(SteerableError, ConnectionError):
    """The low-level controller cannot be reached for now (a policy server's connection was lost):
    the runtime holds the robot still, says so once, and asks again until it answers."""


class VLMError(SteerableError):
    """A vision-language model backend failed (unreachable, wrong model, bad replies)."""


class VLMReplyError(VLMError):
    """One VLM call still had no usable reply after its retries; `reason` says why."""

    def __init__(self, message: str, *, reason: str = "", purpose: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message
        self.purpose = purpose


class VLMUnavailableError(VLMError, ConnectionError):
    """No configured VLM endpoint answers (refused connections, timeouts, server errors)."""


class AnnotationError(SteerableError):
    """The annotation pipeline cannot proceed for the whole dataset."""


class HubError(SteerableError):
    """A Hugging Face Hub operation failed (offline, missing repo, permissions, tags)."""


class MissingExtraError(SteerableError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"this feature needs the optional package {package!r}: "
            f"install it with `pip install 'steerable[{extra}]'`"
        )
        self.package = package
        self.extra = extra


_OS_HINTS = {
    errno.EACCES: "permission denied; choose a location you can write to, or fix its permissions",
    errno.EPERM: "operation not permitted; choose a location you can write to, or fix its permissions",
    errno.EROFS: "the file system is read-only; choose a writable location",
    errno.ENOSPC: "no space left on the device; free some space or choose another location",
    errno.EDQUOT: "disk quota exceeded; free some space or choose another location",
    errno.ENOTDIR: "a part of this path is a file, not a folder; choose another path",
    errno.EEXIST: "it already exists (is a part of the path a file?); choose another path",
    errno.EISDIR: "it is a folder where a file was expected; choose another path",
    errno.ENOENT: "no such file or folder; check the path",
    errno.EMFILE: "too many open files; raise the limit (`ulimit -n 4096`) and run again",
    errno.ENFILE: "too many open files on this system; close some programs and run again",
    errno.ENAMETOOLONG: "the file name is too long; choose a shorter path",
    errno.EIO: "an input/output error from the device; check the disk",
}


def explain_os_error(exc: OSError, *, paths: bool = True) -> str:
    """One line for an OSError: the path(s) it names (unless `paths` is False) and what to do."""
    hint = _OS_HINTS.get(exc.errno or -1)
    paths_ = [str(p) for p in (exc.filename, exc.filename2) if p is not None] if paths else []
    where = " -> ".join(paths_)
    if hint is None:
        text = exc.strerror or str(exc) or type(exc).__name__
        return f"{where}: {text}" if where else text
    return f"{where}: {hint}" if where else hint


def with_article(word: str) -> str:
    """`word` after "a" or "an", for messages that name a kind: "an attribute", "a count"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def os_cause(exc: BaseException) -> OSError | None:
    """The OS error behind `exc`: itself, or the one our WriteError or another library's error wraps.

    None for our other errors (a VideoNotFoundError is a FileNotFoundError, but says it all itself).
    """
    if isinstance(exc, OSError) and not isinstance(exc, SteerableError):
        return exc
    cause = exc.__cause__ if isinstance(exc, WriteError) or not isinstance(exc, SteerableError) else None
    return cause if isinstance(cause, OSError) and not isinstance(cause, SteerableError) else None
