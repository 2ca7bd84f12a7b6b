"""A batch's output rows as an Arrow table: the input columns passed through (but `tokens`) and
the annotator's columns, typed so that pandas and pyarrow read them without Ray; the same table
for the Ray engine's parts and the local engine's Parquet file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .annotator import Annotator

ENTITY_TYPE = pa.struct([("start", pa.int32()), ("end", pa.int32()), ("label", pa.string())])
COLUMN_TYPES = {
    "tokens": pa.list_(pa.string()),
    "ents": pa.list_(ENTITY_TYPE),
    "heads": pa.list_(pa.int32()),
    "deps": pa.list_(pa.string()),
    "docbin": pa.binary(),
}
WORD_COLUMNS = ("id", "text", "tokens")


def annotated_table(annotator: Annotator, table: pa.Table) -> pa.Table:
    """Rows with `text` or `tokens` (and `id`) in, the same rows out with the annotator's columns."""
    columns = {name: table.column(name).to_pylist() for name in WORD_COLUMNS if name in table.column_names}
    output = annotator.annotate_columns(columns)
    kept = table.drop_columns(["tokens"]) if "tokens" in table.column_names else table
    for name, values in output.items():
        if name == "vectors":
            array = nested_float_lists(values, 3 if annotator.layers == "all" else 2, annotator.vector_width)
        else:
            array = pa.array(values, COLUMN_TYPES[name])
        kept = kept.drop_columns([name]) if name in kept.column_names else kept
        kept = kept.append_column(name, array)
    return kept


def nested_float_lists(arrays: list[np.ndarray], ndim: int, width: int) -> pa.Array:
    """Rows of float32 arrays of `ndim` dimensions, the last of size `width`, as one Arrow column
    of nested lists: list<fixed_size_list<float32, D>> for (n, D) rows, one more list level for
    (L + 1, n, D)."""
    flat = [np.ascontiguousarray(array, dtype=np.float32).reshape(-1) for array in arrays]
    values = np.concatenate(flat) if flat else np.zeros(0, dtype=np.float32)
    column: pa.Array = pa.FixedSizeListArray.from_arrays(pa.array(values, pa.float32()), width)
    for level in reversed(range(ndim - 1)):
        # each row has prod(shape[:level]) lists of shape[level] items at this level
        lengths = [np.full(int(np.prod(array.shape[:level])), array.shape[level]) for array in arrays]
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths or [[]]))]).astype(np.int32)
        column = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), column)
    return column
