"""The writers of a run: `PartWriter` actors load the shipped model once, then embed or annotate
each input block (`blocks.BLOCK_SCHEMA`) and write it as one output part. The command's process
reads neither rows nor vectors.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import ray
import spacy
from spacy.util import load_config

from ..annotator import Annotator
from ..precision import apply_plan, configured_precisions
from .blocks import unpacked
from .layout import PART_KEY
from .mapper import ElmoMapper, use_assigned_resources
from .run_folder import RunFolder, ids_digest
from .shipping import ModelBundle

RECEIPT_SCHEMA = pa.schema(
    [
        ("file", pa.int64()),
        ("block", pa.int64()),
        ("rows", pa.int64()),
        ("tokens", pa.int64()),
        ("bytes", pa.int64()),
    ]
)


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
