"""Per-episode, per-module staging on disk, with a manifest that makes runs resumable.

Layout: `<work>/.steerable/staging/episode_000042/<module>.jsonl` (one row per line) and
`<module>.done.json` (the completion marker: fingerprint hash, row count, meta, notes). A module's
output counts as staged only when its marker exists and its hash matches the current fingerprint;
both files are written atomically, rows first, so a crash never leaves a marker without rows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steerable.dataset.atomic import atomic_write_bytes, atomic_write_json

__all__ = ["StagedOutput", "Staging", "fingerprint_hash"]


def fingerprint_hash(fingerprint: dict[str, Any]) -> str:
    text = json.dumps(fingerprint, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class StagedOutput:
    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    notes: list[str]
    fingerprint: str


class Staging:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def episode_dir(self, episode_index: int) -> Path:
        return self.root / f"episode_{episode_index:06d}"

    def _rows_path(self, episode_index: int, module: str) -> Path:
        return self.episode_dir(episode_index) / f"{module}.jsonl"

    def _marker_path(self, episode_index: int, module: str) -> Path:
        return self.episode_dir(episode_index) / f"{module}.done.json"

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
        lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        rows_path = self._rows_path(episode_index, module)
        # No fsync: a marker is trusted only when the rows' hash matches, so a file lost to a
        # power cut just means the episode is redone. Keeps thousands of fsyncs off the event loop.
        atomic_write_bytes(rows_path, lines.encode("utf-8"), durable=False)
        digest = hashlib.sha256(lines.encode("utf-8")).hexdigest()
        marker = {
            "fingerprint": fingerprint,
            "rows": len(rows),
            "rows_sha256": digest,
            "meta": meta or {},
            "notes": notes or [],
        }
        atomic_write_json(self._marker_path(episode_index, module), marker, durable=False)

    def load(self, episode_index: int, module: str) -> StagedOutput | None:
        """The staged output, or None when absent, incomplete or tampered with."""
        marker_path = self._marker_path(episode_index, module)
        rows_path = self._rows_path(episode_index, module)
        try:
            marker = json.loads(marker_path.read_text(encoding="utf-8"))
            data = rows_path.read_bytes()
        except (FileNotFoundError, ValueError):
            return None
        if hashlib.sha256(data).hexdigest() != marker.get("rows_sha256"):
            return None
        rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        return StagedOutput(rows, marker.get("meta", {}), marker.get("notes", []), marker["fingerprint"])

    def is_current(self, episode_index: int, module: str, fingerprint: str) -> bool:
        staged = self.load(episode_index, module)
        return staged is not None and staged.fingerprint == fingerprint

    def modules_staged(self, episode_index: int) -> list[str]:
        folder = self.episode_dir(episode_index)
        return sorted(p.name[: -len(".done.json")] for p in folder.glob("*.done.json"))
