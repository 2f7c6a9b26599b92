"""The one gateway to pyarrow.parquet for reading: failures become our typed errors."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from steerable.errors import CorruptDatasetError, DatasetNotFoundError

__all__ = ["file_metadata", "read_first_row", "read_parquet", "read_row_groups"]

_footer_cache: dict[tuple[str, int, int, int], pq.FileMetaData] = {}
_cache_lock = threading.Lock()


def _key(path: Path) -> tuple[str, int, int, int]:
    st = path.stat()
    # The inode too: a committed new version replaces files by rename, possibly within one mtime tick.
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)


def file_metadata(path: Path) -> pq.FileMetaData:
    """The parquet footer, cached per (path, mtime, size) so repeated episode reads skip it."""
    try:
        key = _key(path)
    except FileNotFoundError as exc:
        raise DatasetNotFoundError(f"{path} does not exist") from exc
    with _cache_lock:
        cached = _footer_cache.get(key)
    if cached is not None:
        return cached
    try:
        meta = pq.read_metadata(path)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptDatasetError(f"{path} is not a readable parquet file: {exc}") from exc
    with _cache_lock:
        _footer_cache[key] = meta
    return meta


def read_parquet(
    path: Path, columns: Sequence[str] | None = None, *, optional: Sequence[str] = ()
) -> pa.Table:
    """Read `columns` of a whole file; names in `optional` may be absent, the rest must exist."""
    meta = file_metadata(path)
    present = set(meta.schema.to_arrow_schema().names)
    if columns is not None:
        missing = [c for c in columns if c not in present and c not in optional]
        if missing:
            raise CorruptDatasetError(f"{path} lacks column(s) {missing}")
        columns = [c for c in columns if c in present]
    try:
        # ParquetFile, not pq.read_table: that goes through pyarrow.dataset, whose import pulls in
        # pandas (a third of a second before the first byte is read).
        return pq.ParquetFile(path, metadata=meta).read(columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptDatasetError(f"{path} is not a readable parquet file: {exc}") from exc


def read_row_groups(path: Path, row_groups: Sequence[int], columns: Sequence[str] | None) -> pa.Table:
    meta = file_metadata(path)
    try:
        pf = pq.ParquetFile(path, metadata=meta)
        return pf.read_row_groups(list(row_groups), columns=list(columns) if columns else None)
    except (pa.ArrowException, OSError) as exc:
        raise CorruptDatasetError(f"{path} is not a readable parquet file: {exc}") from exc


def read_first_row(path: Path, row_group: int, columns: Sequence[str]) -> pa.Table:
    """The first row of one row group, decoding only as much of its column chunks as that row needs."""
    meta = file_metadata(path)
    try:
        pf = pq.ParquetFile(path, metadata=meta)
        for batch in pf.iter_batches(batch_size=1, row_groups=[row_group], columns=list(columns), use_threads=False):
            return pa.Table.from_batches([batch])
        return pf.read_row_group(row_group, columns=list(columns))  # an empty row group
    except (pa.ArrowException, OSError) as exc:
        raise CorruptDatasetError(f"{path} is not a readable parquet file: {exc}") from exc
