"""`meta/info.json` as a typed model that keeps unknown keys and key order on round-trip.

Every edit of info.json goes through `DatasetInfo` (a copy with fields assigned, validated) and is
written by `write_info` / `write_info_file`: a file read and written back unchanged keeps its bytes
(the keys it had, in its order, LeRobot's indent of 4), so LeRobot reads what it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from steerable.dataset.atomic import atomic_write_json
from steerable.dataset.layout import DEFAULT_DATA_PATH, DEFAULT_VIDEO_PATH, INFO_PATH, PROVENANCE_KEY
from steerable.errors import CorruptDatasetError, DatasetNotFoundError
from steerable.settings import error_text

__all__ = ["DatasetInfo", "load_info", "write_info", "write_info_file"]


class DatasetInfo(BaseModel):
    """The dataset-level metadata. Unknown keys are kept (LeRobot may add some we do not know)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    codebase_version: str
    fps: int = Field(gt=0)
    features: dict[str, dict[str, Any]]
    total_episodes: int = 0
    total_frames: int = 0
    total_tasks: int = 0
    chunks_size: int = Field(default=1000, gt=0)
    data_files_size_in_mb: int = Field(default=100, gt=0)
    video_files_size_in_mb: int = Field(default=200, gt=0)
    data_path: str = DEFAULT_DATA_PATH
    video_path: str | None = DEFAULT_VIDEO_PATH
    robot_type: str | None = None
    splits: dict[str, str] = Field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None

    _key_order: list[str] = PrivateAttr(default_factory=list)

    @field_validator("features")
    @classmethod
    def _features_have_dtype(cls, features: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, spec in features.items():
            if not isinstance(spec, dict) or "dtype" not in spec:
                raise ValueError(f"feature {name!r} has no 'dtype'")
        return features

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DatasetInfo:
        info = cls.model_validate(data)
        info._key_order = list(data)
        return info

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict in the file's original key order; `tools` is dropped when None. A model
        read from a file keeps the keys it had plus those assigned since (no defaults added)."""
        values = self.model_dump(exclude_unset=bool(self._key_order))
        if values.get("tools") is None:
            values.pop("tools", None)
        ordered = [k for k in self._key_order if k in values]
        ordered += [k for k in values if k not in ordered]
        return {k: values[k] for k in ordered}

    @property
    def has_legacy_provenance(self) -> bool:
        """Whether an older steerable wrote its provenance key (`PROVENANCE_KEY`) into info.json."""
        return PROVENANCE_KEY in (self.model_extra or {})

    def without_legacy_provenance(self) -> DatasetInfo:
        """A copy without an older steerable's provenance key (LeRobot warns about it on every load)."""
        out = self.model_copy(deep=True)
        (out.model_extra or {}).pop(PROVENANCE_KEY, None)
        return out

    @property
    def video_keys(self) -> list[str]:
        return [k for k, f in self.features.items() if f.get("dtype") == "video"]

    @property
    def camera_keys(self) -> list[str]:
        """Camera features: videos, plus image features stored inline in the parquet."""
        return [k for k, f in self.features.items() if f.get("dtype") in ("video", "image")]


def load_info(root: Path) -> DatasetInfo:
    path = Path(root) / INFO_PATH
    if not path.is_file():
        raise DatasetNotFoundError(f"{path} does not exist: {root} is not a LeRobot dataset root")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptDatasetError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CorruptDatasetError(f"{path} must hold a JSON object")
    try:
        return DatasetInfo.from_dict(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CorruptDatasetError(f"{path}: invalid '{where}': {error_text(first)}") from exc


def write_info(root: Path, info: DatasetInfo) -> None:
    write_info_file(Path(root) / INFO_PATH, info)


def write_info_file(path: Path, info: DatasetInfo, *, durable: bool = True) -> None:
    """Write `info` as the info.json at `path` (in a folder commit: durable=False, the commit syncs)."""
    atomic_write_json(Path(path), info.to_dict(), durable=durable)
