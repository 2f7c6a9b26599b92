"""The features a new dataset declares (`DatasetBuilder`): checked specs and the data parquet schema."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from steerable.dataset.layout import DEFAULT_FEATURES
from steerable.errors import ConfigError

__all__ = ["ARROW_TYPES", "check_features", "data_schema"]

ARROW_TYPES = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "int32": pa.int32()}


def check_features(features: dict[str, dict[str, Any]], *, fps: int, video_codec: str) -> dict[str, dict[str, Any]]:
    """Each feature as info.json declares it: numeric columns of shape [n], videos of shape [h, w, 3]."""
    checked: dict[str, dict[str, Any]] = {}
    for name, spec in features.items():
        if name in DEFAULT_FEATURES:
            raise ConfigError(f"feature {name!r} is a default column the builder writes itself")
        dtype, shape = spec.get("dtype"), list(spec.get("shape") or [])
        if dtype == "video":
            if len(shape) != 3 or shape[2] != 3:
                raise ConfigError(f"video feature {name!r} needs shape [height, width, 3], got {shape}")
            checked[name] = {
                "dtype": "video",
                "shape": shape,
                "names": ["height", "width", "channels"],
                "info": {
                    "video.height": shape[0],
                    "video.width": shape[1],
                    "video.codec": video_codec,
                    "video.pix_fmt": "yuv420p",
                    "video.is_depth_map": False,
                    "video.fps": fps,
                    "video.channels": 3,
                    "has_audio": False,
                },
            }
        elif dtype in ARROW_TYPES and len(shape) == 1 and shape[0] >= 1:
            checked[name] = {"dtype": dtype, "shape": shape, "names": spec.get("names")}
        else:
            raise ConfigError(
                f"feature {name!r}: unsupported dtype/shape {dtype!r} {shape}; "
                f"use one of {sorted(ARROW_TYPES)} with shape [n], or 'video' with [h, w, 3]"
            )
    return checked


def _hf_feature(dtype: str, shape: list[int]) -> dict[str, Any]:
    value = {"dtype": dtype, "_type": "Value"}
    return value if shape == [1] else {"feature": value, "length": shape[0], "_type": "List"}


def data_schema(columns: dict[str, dict[str, Any]]) -> pa.Schema:
    """The data parquet schema of `columns` (the checked non-video features) and the default columns."""
    specs = columns | DEFAULT_FEATURES
    fields = []
    for name, spec in specs.items():
        value = ARROW_TYPES[spec["dtype"]]
        n = spec["shape"][0]
        fields.append(pa.field(name, value if spec["shape"] == [1] else pa.list_(value, n)))
    hf = {"info": {"features": {k: _hf_feature(s["dtype"], s["shape"]) for k, s in specs.items()}}}
    return pa.schema(fields, metadata={"huggingface": json.dumps(hf)})
