"""`spacy-elmo annotate`: run a trained pipeline over a corpus, here or on a Ray cluster."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import Force, app, reports_errors
from .engines import (
    AddressOption,
    BatchSizeOption,
    Engine,
    EngineOption,
    InputFormatOption,
    LayersOption,
    ResumeOption,
    RowsPerFileOption,
    WorkersOption,
    engine_options,
    run_on_ray,
)


@app.command()
@reports_errors
def annotate(
    pipeline: Annotated[
        str,
        typer.Argument(
            metavar="PIPELINE", help="A trained pipeline: a directory (spacy train's output) or a package."
        ),
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
            metavar="OUTPUT",
            help="--engine local: a JSON-lines file, or Parquet where it ends in .parquet; --engine ray: a "
            "Parquet folder (or URI).",
        ),
    ],
    force: Force = False,
    engine: EngineOption = Engine.local,
    workers: WorkersOption = None,
    address: AddressOption = None,
    resume: ResumeOption = False,
    rows_per_file: RowsPerFileOption = None,
    input_format: InputFormatOption = None,
    batch_size: BatchSizeOption = 64,
    layers: LayersOption = "mix",
) -> None:
    """Run every component of a pipeline over a corpus: one output row per input row, with its
    tokens, ELMo vectors, entities (ents) and, where a parser runs, heads and deps.
    `--layers none` writes the annotations only."""
    ray_options = engine_options(
        engine, workers=workers, address=address, resume=resume, rows_per_file=rows_per_file
    )
    options = {
        "pipeline": pipeline,
        "layers": layers,
        "batch_size": batch_size,
        "input_format": None if input_format is None else input_format.value,
        "force": force,
    }
    if engine is Engine.ray:
        return run_on_ray(input_path, output, **ray_options, **options)
    from ..corpus import run_corpus  # here: --help answers without loading the corpus engines

    typer.echo(run_corpus(input_path, output, **options).line())
