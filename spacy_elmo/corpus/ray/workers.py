"""The writers of a run: `PartWriter` actors load the shipped model once, then turn the rows of
each output part (`blocks.BLOCK_SCHEMA`) into one Parquet file, `batch_size` rows through the
model at a time, written as they are computed. The command's process reads neither rows nor
vectors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import ray
import spacy
from spacy.util import load_config

from ..annotator import Annotator
from ..precision import apply_plan, configured_precisions, pipeline_plan
from .blocks import unpacked
from .layout import PART_KEY
from .mapper import ElmoMapper, use_assigned_resources
from .run_folder import RunFolder, ids_digest
from .shipping import ModelBundle

RECEIPT_SCHEMA = pa.schema(
    [
        ("file", pa.int64()),
        ("part", pa.int64()),
        ("rows", pa.int64()),
        ("tokens", pa.int64()),
        ("bytes", pa.int64()),
    ]
)
# output rows gathered into one row group of a part: readers skip and fetch by row group, and
# groups of a few batches each would make thousands per file
ROW_GROUP_BYTES = 16 * 1024 * 1024


class PartWriter:
    """An actor for `map_batches`: loads the shipped model once, then turns each part's rows into
    one output part (its rows, in order, with the run's provenance) and returns a receipt row.

    bundle_refs: the shipped model's object reference, in a list (Ray passes a bare reference
        on as the object itself, which would copy the model into every actor's arguments).
    provenance: the Parquet schema metadata of every part.
    """

    def __init__(
        self,
        *,
        bundle_refs: list[ray.ObjectRef],
        run_folder: RunFolder,
        layers: str | None,
        plan: Any,
        provenance: dict[bytes, bytes],
        batch_size: int,
    ) -> None:
        bundle: ModelBundle = ray.get(bundle_refs[0])
        use_assigned_resources()
        with bundle.unpacked() as folder:
            if bundle.kind == "bilm":
                annotator = Annotator.from_model(folder, layers=layers or "average")
            else:  # loaded in float32: the run's plan replaces what its config says
                settings = configured_precisions(load_config(folder / "config.cfg"))
                overrides = {f"components.{name}.precision": "fp32" for name in settings}
                nlp = spacy.load(folder, config=overrides)
                annotator = Annotator(nlp, layers=layers or "mix", split_on_whitespace=False, docbin=False)
        apply_plan(annotator.nlp, plan)
        self.mapper = ElmoMapper.from_annotator(annotator)
        self.run_folder, self.provenance, self.batch_size = run_folder, provenance, batch_size

    def __call__(self, batch: pa.Table) -> pa.Table:
        receipts = [self.write_part(block) for block in batch.to_pylist()]
        return pa.Table.from_pylist(receipts, schema=RECEIPT_SCHEMA)

    def write_part(self, block: dict[str, Any]) -> dict[str, int]:
        rows = unpacked(block["rows"])
        ids: list[Any] = []
        counts = {"rows": 0, "tokens": 0}

        def computed() -> Iterator[pa.Table]:
            for start in range(0, rows.num_rows, self.batch_size):
                output = self.mapper(rows.slice(start, self.batch_size))
                ids.extend(output.column("id").to_pylist())
                counts["rows"] += output.num_rows
                counts["tokens"] += int(pc.sum(pc.list_value_length(output.column("tokens"))).as_py() or 0)
                yield output

        def footer() -> dict[bytes, bytes]:
            return {PART_KEY: json.dumps({**counts, "ids": ids_digest(ids)}).encode()}

        self.run_folder.write_part(
            block["part"], row_groups(computed()), metadata=self.provenance, footer=footer
        )
        return {
            "file": block["file"],
            "part": block["block"],
            **counts,
            "bytes": block["end_byte"] - block["start_byte"],
        }


def row_groups(tables: Iterator[pa.Table], group_bytes: int = ROW_GROUP_BYTES) -> Iterator[pa.Table]:
    """`tables` joined into tables of about `group_bytes` each (the last may be smaller)."""
    pending: list[pa.Table] = []
    size = 0
    for table in tables:
        pending.append(table)
        size += table.nbytes
        if size >= group_bytes:
            yield pa.concat_tables(pending, promote_options="default")
            pending, size = [], 0
    if pending:
        yield pa.concat_tables(pending, promote_options="default")


def measured_plan(bundle_refs: list[ray.ObjectRef]) -> Any:
    """A Ray task on a worker's resources: the precision plan that `auto` measures (or reads from
    the timing cache of this machine and thread count) for the shipped model, as JSON."""
    bundle: ModelBundle = ray.get(bundle_refs[0])
    use_assigned_resources()
    with bundle.unpacked() as folder:
        if bundle.kind == "bilm":
            nlp = Annotator.from_model(folder, layers="none", precision="auto").nlp
        else:
            nlp = Annotator.from_pipeline(folder, layers="none").nlp
    return pipeline_plan(nlp)
