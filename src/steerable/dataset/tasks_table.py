"""`meta/tasks.parquet` as LeRobot writes it: a pandas frame indexed by `task`, with pandas' metadata."""

from __future__ import annotations

import json

import pyarrow as pa

__all__ = ["tasks_table"]

_TASKS_SCHEMA = pa.schema([("task_index", pa.int64()), ("task", pa.string())])


def tasks_table(names: list[str], indices: list[int]) -> pa.Table:
    """The tasks table; through pandas when installed, else the same bytes built by hand."""
    try:
        import pandas as pd
    except ImportError:
        return _tasks_table_without_pandas(names, indices)
    df = pd.DataFrame({"task_index": indices}, index=pd.Index(names, name="task"))
    # Explicit schema: pandas 3 would otherwise store large_string, LeRobot's files hold string.
    return pa.Table.from_pandas(df, schema=_TASKS_SCHEMA)


def _tasks_table_without_pandas(names: list[str], indices: list[int]) -> pa.Table:
    """The table pandas would write for a DataFrame indexed by `task`, with the same metadata."""
    meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
    }
    table = pa.Table.from_arrays(
        [pa.array(indices, pa.int64()), pa.array(names, pa.string())], schema=_TASKS_SCHEMA
    )
    return table.replace_schema_metadata({"pandas": json.dumps(meta)})
