"""What runs on the cluster: `ReadFiles`, Ray's read tasks (one input file each, read and checked
in blocks, blocks already written skipped), and `PartWriter`, the actors that embed or annotate a
block and write it as one output part. The command's process reads neither rows nor vectors.

A block travels from its reader to its writer as one row, its rows packed as Arrow IPC bytes:
Ray Data merges and splits blocks of rows as it sees fit (a task's outputs become one block), and
a row is the one unit it never cuts, so each writer call gets whole input blocks, and one block
per Ray block spreads them over all the writers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import ray
import spacy
from spacy.util import load_config

from ..annotation import Annotator
from ..bilm.errors import InputError
from ..corpus.reading import id_kind, read_blocks
from ..corpus.sources import Corpus
from ..ray_data import ElmoMapper, use_assigned_resources
from .layout import PART_KEY, batch_manifest_path, batch_part_name, part_name
from .precision import apply_plan, configured_precisions
from .run_folder import RunFolder, ids_digest
from .shipping import ModelBundle

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
RECEIPT_SCHEMA = pa.schema(
    [
        ("file", pa.int64()),
        ("block", pa.int64()),
        ("rows", pa.int64()),
        ("tokens", pa.int64()),
        ("bytes", pa.int64()),
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
    """`map_batches` over a table of file indexes: yields each file's blocks not yet written, one
    row each (`BLOCK_SCHEMA`), and writes the file's manifest once the whole file is read."""

    corpus: Corpus
    run_folder: RunFolder
    block_rows: int

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        for file_index in batch.column("file").to_pylist():
            yield from self.read_file(file_index)

    def read_file(self, file_index: int) -> Iterator[pa.Table]:
        file = self.corpus.files[file_index]
        done = self.run_folder.done_blocks(file_index)
        blocks: list[list[Any]] = []
        kinds: set[str] = set()
        for block in read_blocks(file, self.block_rows, name_ids=len(self.corpus.files) > 1):
            table = block.table
            blocks.append([table.num_rows, ids_digest(table.column("id").to_pylist())])
            kinds.add(id_kind(table))
            if block.index in done:
                continue
            part = part_name(file_index, block.index)
            row = [file_index, block.index, block.start_byte, block.end_byte, part, packed(table)]
            yield pa.Table.from_pylist([dict(zip(BLOCK_SCHEMA.names, row))], schema=BLOCK_SCHEMA)
        manifest = {"name": file.name, "blocks": blocks, "id_kind": kinds.pop() if kinds else None}
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


class PartWriter:
    """An actor for `map_batches`: loads the shipped model once, then turns each input block into
    one output part (its rows, in order, with the run's provenance) and returns a receipt row.

    A run makes its own subclass (`part_writer`) that carries the run's settings, so that Ray
    stores no constructor arguments for it (an actor restarted after a fault needs none).
    """

    bundle_refs: list[ray.ObjectRef]
    run_folder: RunFolder
    layers: str | None
    plan: Any
    provenance: dict[bytes, bytes]  # the Parquet schema metadata of every part

    def __init__(self) -> None:
        bundle: ModelBundle = ray.get(self.bundle_refs[0])
        use_assigned_resources()
        with bundle.unpacked() as folder:
            if bundle.kind == "bilm":
                annotator = Annotator.from_model(folder, layers=self.layers or "average")
            else:  # loaded in float32: the run's plan replaces what its config says
                settings = configured_precisions(load_config(folder / "config.cfg"))
                overrides = {f"components.{name}.precision": "fp32" for name in settings}
                nlp = spacy.load(folder, config=overrides)
                annotator = Annotator(
                    nlp, layers=self.layers or "mix", split_on_whitespace=False, docbin=False
                )
        apply_plan(annotator.nlp, self.plan)
        self.mapper = ElmoMapper.from_annotator(annotator)

    def __call__(self, batch: pa.Table) -> pa.Table:
        receipts = [self.write_block(block) for block in batch.to_pylist()]
        return pa.Table.from_pylist(receipts, schema=RECEIPT_SCHEMA)

    def write_block(self, block: dict[str, Any]) -> dict[str, int]:
        output = self.mapper(unpacked(block["rows"]))
        tokens = int(pc.sum(pc.list_value_length(output.column("tokens"))).as_py() or 0)
        part = {"rows": output.num_rows, "ids": ids_digest(output.column("id").to_pylist()), "tokens": tokens}
        metadata = {PART_KEY: json.dumps(part).encode(), **self.provenance}
        self.run_folder.write_part(block["part"], output.replace_schema_metadata(metadata))
        return {
            "file": block["file"],
            "block": block["block"],
            "rows": output.num_rows,
            "tokens": tokens,
            "bytes": block["end_byte"] - block["start_byte"],
        }


def part_writer(
    bundle_ref: ray.ObjectRef,
    *,
    run_folder: RunFolder,
    layers: str | None,
    plan: Any,
    provenance: dict[bytes, bytes],
) -> type[PartWriter]:
    """The `PartWriter` of one run."""
    settings = {"run_folder": run_folder, "layers": layers, "plan": plan, "provenance": provenance}
    return type("PartWriter", (PartWriter,), {"bundle_refs": [bundle_ref], **settings})
