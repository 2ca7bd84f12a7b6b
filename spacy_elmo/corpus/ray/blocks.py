"""The input side of a run, in Ray's read tasks: `ReadFiles` (one input file each, read and
checked, cut into the rows of one output part each (`cutting.py`), parts already written skipped)
and `DatasetBatches` (a user's Dataset cut into parts). Each part's rows travel to a writer as one
row, packed as Arrow IPC bytes: Ray Data merges and splits blocks of rows as it sees fit (a task's
outputs become one block), and a row is the one unit it never cuts, so each writer call gets a
whole part's rows, and one part per Ray block spreads them over all the writers.

Only pyarrow and our row checks are imported here: the read tasks' processes start beside the
writers, and torch and spaCy would cost each of them seconds of the same cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ...bilm.errors import InputError
from ..reading import id_kind
from ..sources import Corpus
from .cutting import PartCut
from .layout import batch_manifest_path, batch_part_name, part_name
from .run_folder import RunFolder, ids_digest

BLOCK_SCHEMA = pa.schema(
    [
        ("file", pa.int64()),
        ("block", pa.int64()),
        ("start_byte", pa.int64()),
        ("end_byte", pa.int64()),
        ("part", pa.string()),  # the name of its output part
        ("rows", pa.binary()),  # the block's rows, an Arrow IPC stream
    ]
)


def packed(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def unpacked(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


@dataclass(frozen=True)
class ReadFiles:
    """`map_batches` over a table of file indexes: yields each file's parts not yet written, one
    row each (`BLOCK_SCHEMA`: the rows of one output part), and writes the file's manifest once
    the whole file is read.

    done: the parts written before, by input file index (listed once per run, by the command).
    """

    corpus: Corpus
    run_folder: RunFolder
    cut: PartCut
    done: dict[int, frozenset[int]]

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        for file_index in batch.column("file").to_pylist():
            yield from self.read_file(file_index)

    def read_file(self, file_index: int) -> Iterator[pa.Table]:
        file = self.corpus.files[file_index]
        done = self.done.get(file_index, frozenset())
        parts: list[list[Any]] = []
        kinds: set[str] = set()
        for block in self.cut.parts(file, name_ids=len(self.corpus.files) > 1):
            table = block.table
            parts.append([table.num_rows, ids_digest(table.column("id").to_pylist())])
            kinds.add(id_kind(table))
            if block.index in done:
                continue
            part = part_name(file_index, block.index)
            row = [file_index, block.index, block.start_byte, block.end_byte, part, packed(table)]
            yield pa.Table.from_pylist([dict(zip(BLOCK_SCHEMA.names, row))], schema=BLOCK_SCHEMA)
        manifest = {"name": file.name, "parts": parts, "id_kind": kinds.pop() if kinds else None}
        self.run_folder.write_json(self.run_folder.manifest_path(file_index), manifest)


@dataclass(frozen=True)
class DatasetBatches:
    """`map_batches` over a user's Dataset, `batch_size` rows at a time: each batch becomes one
    block row (`BLOCK_SCHEMA`, its part named by the digest of its ids), and its manifest (rows,
    ids digest) is written first, for the completeness check."""

    run_folder: RunFolder

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = []
        if batch.num_rows:
            check_dataset_batch(batch)
            digest = ids_digest(batch.column("id").to_pylist())
            manifest = {"rows": batch.num_rows, "ids": digest}
            self.run_folder.write_json(batch_manifest_path(self.run_folder.path, digest), manifest)
            rows.append(dict(zip(BLOCK_SCHEMA.names, [-1, -1, 0, 0, batch_part_name(digest), packed(batch)])))
        return pa.Table.from_pylist(rows, schema=BLOCK_SCHEMA)


def check_dataset_batch(batch: pa.Table) -> None:
    """A Dataset's rows need an `id` (integers or strings) and `text` or `tokens`."""
    columns = batch.schema.names
    if "id" not in columns or not ({"text", "tokens"} & set(columns)):
        raise InputError(
            f"The Dataset's rows have the columns {', '.join(columns)}: run_corpus needs an id column "
            '(integers or strings, one per row) and "text" (a string) or "tokens" (a list of strings).'
        )
    id_type = batch.schema.field("id").type
    if not (pa.types.is_integer(id_type) or pa.types.is_string(id_type) or pa.types.is_large_string(id_type)):
        raise InputError(f"The Dataset's id column holds {id_type}: an id is an integer or a string.")
