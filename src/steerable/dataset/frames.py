"""Turning frame-table columns into numpy arrays, whatever list layout the writer used."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from steerable.errors import DatasetError

__all__ = ["ACTION_KEYS", "STATE_KEYS", "feature_matrix", "float_vectors", "is_float_vector", "pick_feature",
           "vector_names"]

# The names datasets give the robot's state and its commands, in order of preference (LeRobot's
# recorder writes the first, other tools the second): what annotate's motion module and `steerable
# train` read when no feature is named.
STATE_KEYS = ("observation.state", "state")
ACTION_KEYS = ("action", "actions")
FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})


def feature_matrix(table: pa.Table, name: str) -> np.ndarray:
    """A numeric feature as an (frames, dims) float array.

    LeRobot stores vectors as fixed_size_list, pandas-written datasets as plain list; scalars come
    back as (frames, 1).
    """
    if name not in table.column_names:
        raise DatasetError(f"the frame table has no column {name!r} (columns: {table.column_names})")
    column = table.column(name).combine_chunks()
    kind = column.type
    if pa.types.is_fixed_size_list(kind):
        flat = np.asarray(column.flatten().to_numpy(zero_copy_only=False))
        return flat.reshape(len(column), kind.list_size)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = set(column.value_lengths().to_pylist())
        if len(lengths) > 1:
            raise DatasetError(f"column {name!r} holds vectors of different lengths {sorted(lengths)}")
        width = lengths.pop() if lengths else 0
        return np.asarray(column.flatten().to_numpy(zero_copy_only=False)).reshape(len(column), width)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return np.asarray(column.to_numpy(zero_copy_only=False)).reshape(-1, 1)
    raise DatasetError(f"column {name!r} of type {kind} is not a numeric feature")


def vector_names(feature: Mapping[str, Any], width: int) -> list[str]:
    """Per-dimension names of a feature; LeRobot writes a list or {"motors": [...]}."""
    names = feature.get("names")
    if isinstance(names, dict):
        flat = [n for group in names.values() if isinstance(group, list) for n in group]
        names = flat or None
    if isinstance(names, list) and len(names) == width and all(isinstance(n, str) for n in names):
        return list(names)
    return [f"dim_{i}" for i in range(width)]


def is_float_vector(feature: Mapping[str, Any]) -> bool:
    """A float feature of one dimension (a state or action vector), not a scalar column or an image."""
    return feature.get("dtype") in FLOAT_DTYPES and len(feature.get("shape") or []) == 1


def float_vectors(features: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The float vector features' names, sorted (what an error offers in place of a missing name)."""
    return sorted(k for k, f in features.items() if is_float_vector(f))


def pick_feature(features: Mapping[str, Mapping[str, Any]], candidates: tuple[str, ...]) -> str | None:
    """The first of `candidates` that `features` holds as a float vector, or None."""
    return next((k for k in candidates if k in features and is_float_vector(features[k])), None)
