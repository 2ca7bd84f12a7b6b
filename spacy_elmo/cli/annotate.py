"""`spacy-elmo annotate`: run a trained pipeline over a corpus, here or on a Ray cluster; and
`embed --engine ray`, which shares the engine."""

from __future__ import annotations

import json
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from tqdm import tqdm

from ..annotation import Annotator
from ..annotation.inputs import check_input, read_batches
from ..annotation.rows import words_column
from ..bilm.errors import ConfigError
from ..bilm.io.atomic import atomic_path
from .main import Force, app, check_output, reports_errors
from .ray_engine import (
    AddressOption,
    Engine,
    EngineOption,
    RunSummary,
    WorkersOption,
    run_on_ray,
    worker_model,
    worker_path,
)


class AnnotateLayers(StrEnum):
    all = "all"
    top = "top"
    average = "average"
    mix = "mix"
    none = "none"


def json_value(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def annotate_to_jsonl(
    annotator: Annotator, input_path: Path, kind: str, output: Path, batch_size: int
) -> RunSummary:
    """One JSON object per input row, in input order: the input columns (but `tokens`) and the
    annotator's columns, vectors as nested lists of floats."""
    rows = tokens = 0
    started = time.perf_counter()
    with atomic_path(output) as temporary, temporary.open("w", encoding="utf8") as handle:
        with tqdm(unit=" rows", desc="annotating") as progress:
            for columns in read_batches(input_path, kind, batch_size):
                source = words_column(columns)
                computed = annotator.annotate(source, columns[source], columns.get("id"))
                merged = {name: values for name, values in columns.items() if name != "tokens"} | computed
                for index in range(len(columns[source])):
                    row = {name: json_value(values[index]) for name, values in merged.items()}
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                rows += len(columns[source])
                tokens += sum(len(row_tokens) for row_tokens in computed["tokens"])
                progress.update(len(columns[source]))
    return RunSummary(rows=rows, tokens=tokens, seconds=time.perf_counter() - started, where="in 1 process")


@app.command()
@reports_errors
def annotate(
    pipeline: Annotated[
        str, typer.Argument(help="A trained pipeline: a directory (spacy train's output) or a package.")
    ],
    input_path: Annotated[
        Path,
        typer.Argument(
            help="A text file (one text per line; ids are line numbers), JSONL (id and text or tokens), "
            "or Parquet (a file or a folder, the same columns)."
        ),
    ],
    output: Annotated[
        Path, typer.Argument(help="--engine local: a JSONL file; --engine ray: a Parquet folder.")
    ],
    force: Force = False,
    engine: EngineOption = Engine.local,
    workers: WorkersOption = None,
    address: AddressOption = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Rows per batch.")] = 64,
    layers: Annotated[
        AnnotateLayers,
        typer.Option(
            help="The vectors column: the elmo component's mix (token._.elmo), all (L+1, n, 2P), "
            "top or average (n, 2P), or none."
        ),
    ] = AnnotateLayers.mix,
) -> None:
    """Run every component of a pipeline over a corpus: one output row per input row, with its
    tokens, ELMo vectors, entities (ents) and, where a parser runs, heads and deps."""
    check_output(output, force, directory=engine is Engine.ray, inputs=[input_path])
    kind = check_input(input_path)
    if engine is Engine.ray:
        mapper = {"pipeline": worker_path(pipeline), "layers": layers.value}
        summary = run_on_ray(
            mapper, input_path, kind, output, workers=workers, address=address, batch_size=batch_size
        )
    else:
        annotator = Annotator.from_pipeline(pipeline, layers=layers.value)
        summary = annotate_to_jsonl(annotator, input_path, kind, output, batch_size)
    typer.echo(summary.line(output))


def embed_on_ray(
    model: str | Path,
    weights: Path | None,
    input_path: Path,
    output: Path,
    *,
    force: bool,
    layers: str,
    precision: str,
    stateful: bool,
    batch_size: int,
    workers: int | None,
    address: str | None,
) -> None:
    """`spacy-elmo embed --engine ray`: the biLM's vectors of every row as a Parquet folder."""
    if stateful:
        raise ConfigError(
            "--stateful carries LSTM states from one batch to the next, so it needs one process reading "
            "the lines in order: use --engine local with it."
        )
    check_output(output, force, directory=True, inputs=[input_path])
    kind = check_input(input_path)
    mapper = {
        "model": worker_model(model),
        "weights": None if weights is None else worker_path(weights),
        "layers": layers,
        "precision": precision,
    }
    summary = run_on_ray(
        mapper, input_path, kind, output, workers=workers, address=address, batch_size=batch_size
    )
    typer.echo(summary.line(output))
