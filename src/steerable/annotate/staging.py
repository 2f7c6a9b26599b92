"""Per-episode, per-module staging, with a manifest that makes runs resumable.

Layout: `<staging>/episode_000042/<module>.jsonl` (one row per line) and `<module>.done.json`
(the completion marker: fingerprint hash, row count, rows hash, meta, notes). A module's output
counts as staged only when its marker exists and its hash matches the current fingerprint; rows are
written first and the marker last, so a crash never leaves a marker without its rows.

The staging folder is a local path (default: `<dataset>/.steerable/staging`), where both files are
written to a temp file and renamed into place, or any fsspec URL (`file:///...`, `s3://bucket/...`,
`memory://...`) that every Ray actor can reach. On a URL each file is one whole-object write
(atomic on object stores; on `file://` a temp file renamed into place, as for a local path).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steerable.dataset.atomic import atomic_write_bytes
from steerable.errors import ConfigError, SteerableError

__all__ = ["MissingFilesystemError", "StagedOutput", "Staging", "fingerprint_hash", "is_url"]


class MissingFilesystemError(SteerableError, ImportError):
    """The staging URL's protocol needs a package that is not installed."""

    def __init__(self, url: str, protocol: str, package: str) -> None:
        super().__init__(
            f"--staging_dir {url}: the {protocol}:// protocol needs the package {package!r}: "
            f"install it with `pip install {package}`"
        )
        self.package = package


def is_url(location: str | Path) -> bool:
    """Whether a staging location is an fsspec URL (`proto://...`) rather than a local path."""
    return isinstance(location, str) and "://" in location


def fingerprint_hash(fingerprint: dict[str, Any]) -> str:
    text = json.dumps(fingerprint, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class StagedOutput:
    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    notes: list[str]
    fingerprint: str


def _marker_bytes(marker: dict[str, Any]) -> bytes:
    # The same formatting as `atomic_write_json` (indent 4, trailing newline).
    return (json.dumps(marker, indent=4, ensure_ascii=False) + "\n").encode("utf-8")


def _open_url(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it); a missing protocol package or an unknown protocol fail here."""
    try:
        import fsspec
        from fsspec.registry import known_implementations
    except ImportError as exc:  # pragma: no cover - fsspec is a core dependency
        raise MissingFilesystemError(url, url.split("://", 1)[0], "fsspec") from exc
    protocol = url.split("://", 1)[0].split("::")[-1]
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as exc:
        known = known_implementations.get(protocol, {})
        package = str(known.get("class", protocol)).split(".", 1)[0]
        raise MissingFilesystemError(url, protocol, package) from exc
    except ValueError as exc:
        raise ConfigError(f"--staging_dir {url}: {exc} (use a local path or an fsspec URL)") from exc
    return fs, str(path).rstrip("/")


class _UrlStore:
    """Staging files on an fsspec filesystem."""

    def __init__(self, url: str) -> None:
        from fsspec.implementations.local import LocalFileSystem

        self.fs, self.base = _open_url(url)
        self._renames = isinstance(self.fs, LocalFileSystem)  # rename is atomic there

    def write(self, path: str, data: bytes) -> None:
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        if not self._renames:
            self.fs.pipe_file(path, data)  # one whole-object PUT
            return
        tmp = f"{path.rsplit('/', 1)[0]}/.{path.rsplit('/', 1)[1]}.{uuid.uuid4().hex[:8]}.tmp"
        self.fs.pipe_file(tmp, data)
        self.fs.mv(tmp, path)

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def markers(self, folder: str) -> list[str]:
        return [str(p).rsplit("/", 1)[-1] for p in self.fs.glob(f"{folder}/*.done.json")]

    def remove(self, path: str) -> None:
        if self.fs.exists(path):
            self.fs.rm_file(path)


class Staging:
    """The run's staging folder: a local path, or an fsspec URL (checked when constructed)."""

    def __init__(self, root: str | Path) -> None:
        self.root: str | Path = root if is_url(root) else Path(root)
        self._store = _UrlStore(str(root)) if is_url(root) else None

    def episode_dir(self, episode_index: int) -> Path:
        """The episode's folder (local staging only)."""
        return Path(self.root) / f"episode_{episode_index:06d}"

    def _folder(self, episode_index: int) -> str:
        name = f"episode_{episode_index:06d}"
        return f"{self._store.base}/{name}" if self._store is not None else str(self.episode_dir(episode_index))

    def _rows_path(self, episode_index: int, module: str) -> str:
        return f"{self._folder(episode_index)}/{module}.jsonl"

    def _marker_path(self, episode_index: int, module: str) -> str:
        return f"{self._folder(episode_index)}/{module}.done.json"

    def save(
        self,
        episode_index: int,
        module: str,
        rows: list[dict[str, Any]],
        *,
        fingerprint: str,
        meta: dict[str, Any] | None = None,
        notes: list[str] | None = None,
    ) -> None:
        lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")
        marker = {
            "fingerprint": fingerprint,
            "rows": len(rows),
            "rows_sha256": hashlib.sha256(lines).hexdigest(),
            "meta": meta or {},
            "notes": notes or [],
        }
        rows_path, marker_path = self._rows_path(episode_index, module), self._marker_path(episode_index, module)
        if self._store is not None:
            self._store.write(rows_path, lines)
            self._store.write(marker_path, _marker_bytes(marker))  # last: the marker makes it done
            return
        # No fsync: a marker is trusted only when the rows' hash matches, so a file lost to a
        # power cut just means the episode is redone. Keeps thousands of fsyncs off the event loop.
        atomic_write_bytes(Path(rows_path), lines, durable=False)
        atomic_write_bytes(Path(marker_path), _marker_bytes(marker), durable=False)

    def _read(self, path: str) -> bytes:
        return self._store.read(path) if self._store is not None else Path(path).read_bytes()

    def load(self, episode_index: int, module: str) -> StagedOutput | None:
        """The staged output, or None when absent, incomplete or tampered with."""
        try:
            marker = json.loads(self._read(self._marker_path(episode_index, module)).decode("utf-8"))
            data = self._read(self._rows_path(episode_index, module))
        except (FileNotFoundError, ValueError):
            return None
        if hashlib.sha256(data).hexdigest() != marker.get("rows_sha256"):
            return None
        rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        return StagedOutput(rows, marker.get("meta", {}), marker.get("notes", []), marker["fingerprint"])

    def discard(self, episode_index: int, module: str) -> None:
        """Forget a staged output (its marker goes): the next run computes it again rather than reusing
        rows that were refused."""
        path = self._marker_path(episode_index, module)
        if self._store is not None:
            self._store.remove(path)
        else:
            Path(path).unlink(missing_ok=True)

    def is_current(self, episode_index: int, module: str, fingerprint: str) -> bool:
        staged = self.load(episode_index, module)
        return staged is not None and staged.fingerprint == fingerprint

    def modules_staged(self, episode_index: int) -> list[str]:
        if self._store is not None:
            names = self._store.markers(self._folder(episode_index))
        else:
            names = [p.name for p in self.episode_dir(episode_index).glob("*.done.json")]
        return sorted(n[: -len(".done.json")] for n in names)
