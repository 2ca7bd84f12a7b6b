"""A corpus's rows through an `Annotator` into one file of one output row per input row, in
input order: JSON lines, or Parquet with the provenance in its schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...bilm.errors import InputError
from ..annotator import Annotator
from ..arrow import annotated_table
from ..parquet import write_options
from ..reading import id_kind, read_blocks
from ..sources import Corpus


def annotated_blocks(annotator: Annotator, corpus: Corpus, batch_size: int) -> Iterator[tuple[Any, int]]:
    """(the output rows of a block as an Arrow table, the input bytes it spans), in input order;
    ids of two types are refused."""
    kinds: set[str] = set()
    for file in corpus.files:
        for block in read_blocks(file, batch_size, name_ids=len(corpus.files) > 1):
            kinds.add(id_kind(block.table))
            if len(kinds) > 1:
                raise InputError(
                    f"{file.name} has {id_kind(block.table)} ids, the files before it other ids: give every "
                    "row an id of one type."
                )
            yield annotated_table(annotator, block.table), block.end_byte - block.start_byte


def write_jsonl(tables: Iterator[Any], path: Path) -> None:
    with path.open("w", encoding="utf8") as handle:
        for table in tables:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in table.to_pylist())


def write_parquet(tables: Iterator[Any], path: Path, metadata: dict[bytes, bytes]) -> None:
    """One Parquet file, `metadata` (the provenance) in its schema."""
    import pyarrow.parquet

    writer = None
    try:
        for table in tables:
            if writer is None:
                schema = table.schema.with_metadata(metadata)
                writer = pyarrow.parquet.ParquetWriter(path, schema, **write_options(schema))
            elif table.schema != writer.schema:
                raise InputError(
                    f"the rows of {path.name} change their columns or types part way ({table.schema.names} "
                    f"after {writer.schema.names}): give every row the same keys, of one type each."
                )
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
