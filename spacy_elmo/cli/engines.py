"""What `embed` and `annotate` share: the options that choose and steer an engine, the layer
choice, and the Ray engine's run (`spacy_elmo.corpus`), printed."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from ..bilm.errors import ElmoError
from ..corpus.layer_choice import LayerChoice
from ..corpus.sources import JSONL, PARQUET, TEXT
from .interrupts import sigterm_interrupts, stopped_run


class Engine(StrEnum):
    local = "local"
    ray = "ray"


LayersOption = Annotated[
    LayerChoice,
    typer.Option(
        help="The vectors: all (L+1, n, D), top or average of the layers (n, D), mix: the elmo component's "
        "scalar mix (n, D, token._.elmo), or none (annotations only)."
    ),
]


class InputFormat(StrEnum):
    text = TEXT
    jsonl = JSONL
    parquet = PARQUET


def engine_options(
    engine: Engine, *, workers: int | None, address: str | None, resume: bool, rows_per_file: int | None
) -> dict[str, Any]:
    """The Ray engine's options as `run_corpus` takes them; refused with the local engine, which
    would ignore them."""
    from ..corpus.run import refuse_ray_options  # here: --help answers without the corpus engines

    given = {"workers": workers, "address": address, "resume": resume, "rows_per_file": rows_per_file}
    if engine is Engine.local:
        refuse_ray_options(given, spelled=lambda name: "--" + name.replace("_", "-"), engine="--engine ray")
    return given


EngineOption = Annotated[
    Engine,
    typer.Option(help="local: this process; ray: a Ray cluster, writing a Parquet folder (spacy-elmo[ray])."),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(min=1, help="--engine ray: workers of one CPU each (default: one per CPU of the cluster)."),
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        help="--engine ray: the cluster to join (HEAD:6379; auto: one running on this machine, "
        "started by `ray start` or by another program, refused if none is); default: start a local "
        "cluster on this machine for the run."
    ),
]
ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="--engine ray: continue the unfinished run into OUTPUT (its process was killed): blocks "
        "already written are kept, the rest computed; the same input, model and options are required.",
    ),
]
RowsPerFileOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="--engine ray: rows of one output file (default: files of about 128 MB of Parquet, fewer "
        "rows where that spreads a small input over every worker); a killed worker loses its unfinished "
        "file.",
    ),
]
BatchSizeOption = Annotated[
    int, typer.Option(min=1, help="Rows embedded at once (speed and memory only: not the output's files).")
]
InputFormatOption = Annotated[
    InputFormat | None,
    typer.Option(
        help="How to read INPUT, whatever its suffixes say (default: .parquet Parquet, .jsonl/.ndjson/.json "
        "JSON lines, any other text; in any case)."
    ),
]


def run_on_ray(source: str, output: str, **options: Any) -> None:
    """`--engine ray` of either command: `scale.run_corpus`, its summary printed. What Ray itself
    prints (its processes' logs, warnings, tracebacks of failed workers, errors its cluster
    reports) goes to a log file, named in the error if the run fails and removed if it succeeds;
    the terminal shows our progress bar and our one line. Ctrl-C and SIGTERM stop the run with one
    line too; a local cluster the command started ends with it, its session folder removed."""
    from ..corpus import run_corpus

    descriptor, name = tempfile.mkstemp(prefix="spacy-elmo-ray-", suffix=".log")  # never a planted link
    log = Path(name)
    try:
        with (
            open(descriptor, "w", encoding="utf8") as handle,
            output_to(handle) as terminal,
            started_cluster_shut_down(),
            sigterm_interrupts(),
        ):
            summary = run_corpus(source, output, engine="ray", progress_file=terminal, **options)
    except ElmoError as error:
        if log.stat().st_size == 0:
            log.unlink()
            raise
        raise type(error)(f"{error} (Ray's own messages: {log})") from None
    except KeyboardInterrupt as interrupt:
        log.unlink()
        raise stopped_run(output, interrupt) from None
    log.unlink(missing_ok=True)
    typer.echo(summary.line())


@contextmanager
def started_cluster_shut_down() -> Iterator[None]:
    """The local Ray cluster the with-block started (if it did) ends with it, however it ends."""
    try:
        yield
    finally:
        if "ray" in sys.modules:  # else no cluster started: a refusal came first
            from ..corpus.ray.cluster import shut_down_started_cluster

            shut_down_started_cluster()


@contextmanager
def output_to(log: TextIO) -> Iterator[TextIO]:
    """Send the process's standard output and error, and those of every process it starts, to
    the open file `log`; yields the terminal's standard error for our own output.

    Standard output too: Ray's driver prints the errors its cluster reports (a worker that died
    and whose task was retried) to standard output whatever `log_to_driver` says."""
    streams = (sys.stdout, sys.stderr)
    for stream in streams:
        stream.flush()
    saved = {descriptor: os.dup(descriptor) for descriptor in (1, 2)}
    for descriptor in saved:
        os.dup2(log.fileno(), descriptor)
    terminal = os.fdopen(os.dup(saved[2]), "w", encoding="utf8")
    try:
        yield terminal
    finally:
        for stream in streams:
            stream.flush()
        terminal.close()
        for descriptor, original in saved.items():
            os.dup2(original, descriptor)
            os.close(original)
