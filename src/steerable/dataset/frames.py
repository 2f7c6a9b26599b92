"""Turning frame-table columns into numpy arrays, whatever list layout the writer used."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from steerable.errors import DatasetError

__all__ = ["feature_matrix", "vector_names"]


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
        flat = column.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(column), kind.list_size)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = set(column.value_lengths().to_pylist())
        if len(lengths) > 1:
            raise DatasetError(f"column {name!r} holds vectors of different lengths {sorted(lengths)}")
        width = lengths.pop() if lengths else 0
        return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), width)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return column.to_numpy(zero_copy_only=False).reshape(-1, 1)
    raise DatasetError(f"column {name!r} of type {kind} is not a numeric feature")


def vector_names(feature: dict, width: int) -> list[str]:
    """Per-dimension names of a feature; LeRobot writes a list or {"motors": [...]}."""
    names = feature.get("names")
    if isinstance(names, dict):
        flat = [n for group in names.values() if isinstance(group, list) for n in group]
        names = flat or None
    if isinstance(names, list) and len(names) == width and all(isinstance(n, str) for n in names):
        return list(names)
    return [f"dim_{i}" for i in range(width)]
