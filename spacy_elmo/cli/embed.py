"""`spacy-elmo embed`: contextual vectors of a file of sentences into HDF5 (AllenNLP's old `elmo`
command's layout, its keys from "0"), or with `--engine ray` of a corpus into Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..bilm.errors import ConfigError
from ..bilm.precision_modes import PrecisionChoice
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
def embed(
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help="A model directory, en_elmo_cpu, a published name (spacy-elmo download --list), "
            "or an AllenNLP options.json with --weights.",
        ),
    ],
    input_path: Annotated[
        str,
        typer.Argument(
            metavar="INPUT",
            help="UTF-8 text, one whitespace-tokenised sentence per line (its id the line number from 1; "
            "a blank line is a row without tokens); with --engine ray also JSON lines (id and text or "
            "tokens) or Parquet, a folder of files, a glob or a URI.",
        ),
    ],
    output: Annotated[
        str,
        typer.Argument(
            metavar="OUTPUT", help="HDF5 file to write; with --engine ray, a Parquet folder (or URI)."
        ),
    ],
    force: Force = False,
    weights: Annotated[Path | None, typer.Option("--weights", "-w", help="AllenNLP HDF5 weights.")] = None,
    layers: LayersOption = "average",
    batch_size: BatchSizeOption = 64,
    stateful: Annotated[
        bool, typer.Option(help="Carry LSTM states across batches (legacy AllenNLP).")
    ] = False,
    precision: Annotated[
        PrecisionChoice,
        typer.Option(
            help="How the matrix products run: fp32 (exact), bf16, int8, or auto (each product in the "
            "mode timed fastest on this machine, fp32 where none is faster; `spacy-elmo info MODEL "
            "--precision auto` shows the plan; with --engine ray measured once, for every worker). "
            "The reduced ones deviate slightly."
        ),
    ] = "fp32",
    engine: EngineOption = Engine.local,
    workers: WorkersOption = None,
    address: AddressOption = None,
    resume: ResumeOption = False,
    rows_per_file: RowsPerFileOption = None,
    input_format: InputFormatOption = None,
) -> None:
    """Embed every line of a text file into HDF5, in AllenNLP's `elmo` layout: dataset "0" holds
    the first line's vectors (row id 1), "N" line N+1's (a blank line an empty one), and
    sentence_to_index maps each line to its key, so scripts that read `f[str(i)]` from AllenNLP's
    files read these. With --engine ray: every row of a corpus, on a Ray cluster, into Parquet."""
    ray_options = engine_options(
        engine, workers=workers, address=address, resume=resume, rows_per_file=rows_per_file
    )
    options = {
        "model": model,
        "weights": weights,
        "layers": layers,
        "precision": precision,
        "batch_size": batch_size,
        "input_format": None if input_format is None else input_format.value,
        "force": force,
    }
    if engine is Engine.ray:
        if stateful:
            raise ConfigError(
                "--stateful carries LSTM states from one batch to the next, so it needs one process reading "
                "the lines in order: use --engine local with it."
            )
        return run_on_ray(input_path, output, **ray_options, **options)
    from ..corpus import run_corpus  # here: --help answers without loading the corpus engines

    summary = run_corpus(input_path, output, output_format="hdf5", stateful=stateful, **options)
    typer.echo(summary.line())
