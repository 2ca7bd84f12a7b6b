"""`spacy-elmo annotate`: run a trained pipeline over a corpus, here or on a Ray cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from tqdm import tqdm

from ..annotation import Annotator
from ..annotation.arrow import annotated_table
from ..bilm.errors import InputError
from ..bilm.io.atomic import atomic_path, atomic_write_text
from ..corpus.model_source import pipeline_source
from ..corpus.outputs import check_not_input, claimed_output
from ..corpus.parquet import write_options
from ..corpus.provenance import provenance, schema_metadata, sidecar_path
from ..corpus.reading import id_kind, read_blocks
from ..corpus.sources import Corpus, find_corpus
from ..corpus.summary import RunSummary
from ..scale.precision import pipeline_plan
from .common import Force, app, check_output, reports_errors
from .engines import (
    AddressOption,
    Engine,
    EngineOption,
    InputFormatOption,
    LayersOption,
    ResumeOption,
    WorkersOption,
    check_engine_options,
    run_on_ray,
)


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


def annotate_locally(
    annotator: Annotator, corpus: Corpus, output: Path, batch_size: int, model: dict[str, str]
) -> RunSummary:
    """One output row per input row, in input order: JSON lines, or Parquet where `output` ends
    in `.parquet` (vectors as nested lists of floats either way), with the provenance of `model`
    (`ModelSource.identity`) in the Parquet file or beside the JSON lines. Nothing is written
    for an input without rows."""
    counts = {"rows": 0, "tokens": 0}
    started = time.perf_counter()

    def counted(progress: tqdm) -> Iterator[Any]:
        for table, n_bytes in annotated_blocks(annotator, corpus, batch_size):
            counts["rows"] += table.num_rows
            counts["tokens"] += sum(len(tokens) for tokens in table.column("tokens").to_pylist())
            progress.update(n_bytes)
            progress.set_postfix_str(f"{counts['rows']:,} rows", refresh=False)
            yield table

    record = provenance(model, annotator.layers, pipeline_plan(annotator.nlp))
    parquet = output.suffix.lower() == ".parquet"
    write = partial(write_parquet, metadata=schema_metadata(record)) if parquet else write_jsonl
    with atomic_path(output) as temporary:
        with tqdm(
            total=corpus.total_bytes, unit="B", unit_scale=True, desc="annotating", disable=None
        ) as progress:
            write(counted(progress), temporary)
        if counts["rows"] == 0:
            raise InputError(f"Input {corpus.location} has no rows: there is nothing to annotate.")
        # gone before the output is replaced: an old sidecar never describes a new output
        sidecar_path(output).unlink(missing_ok=True)
    if not parquet:
        atomic_write_text(sidecar_path(output), json.dumps(record, indent=1))
    return RunSummary(
        counts["rows"], counts["tokens"], time.perf_counter() - started, "in 1 process", str(output)
    )


@app.command()
@reports_errors
def annotate(
    pipeline: Annotated[
        str, typer.Argument(help="A trained pipeline: a directory (spacy train's output) or a package.")
    ],
    input_path: Annotated[
        str,
        typer.Argument(
            metavar="INPUT",
            help="Text (one row per line, blank lines included; its id is the line number from 1), JSON "
            "lines (id and text or tokens), or Parquet (same columns): a file, a folder of files, a glob; "
            "with --engine ray also a URI (file://, s3://, gs://, hdfs://).",
        ),
    ],
    output: Annotated[
        str,
        typer.Argument(
            help="--engine local: a JSON-lines file, or Parquet where it ends in .parquet; --engine ray: a "
            "Parquet folder (or URI)."
        ),
    ],
    force: Force = False,
    engine: EngineOption = Engine.local,
    workers: WorkersOption = None,
    address: AddressOption = None,
    resume: ResumeOption = False,
    input_format: InputFormatOption = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Rows per batch.")] = 64,
    layers: LayersOption = "mix",
) -> None:
    """Run every component of a pipeline over a corpus: one output row per input row, with its
    tokens, ELMo vectors, entities (ents) and, where a parser runs, heads and deps.
    `--layers none` writes the annotations only."""
    check_engine_options(engine, workers=workers, address=address, resume=resume)
    kind = None if input_format is None else input_format.value
    if engine is Engine.ray:
        options = {"pipeline": pipeline, "layers": layers, "input_format": kind}
        settings = {"workers": workers, "address": address, "resume": resume, "force": force}
        return run_on_ray(input_path, output, batch_size=batch_size, **options, **settings)
    corpus = find_corpus(input_path, kind=kind, allow_stream=True)
    check_not_input(str(Path(output).absolute()), corpus)
    check_output(Path(output), force)
    with claimed_output(Path(output)), pipeline_source(pipeline) as source:
        annotator = Annotator.from_pipeline(source.folder, layers=layers)
        typer.echo(annotate_locally(annotator, corpus, Path(output), batch_size, source.identity()).line())
