"""Corpus jobs: rows of text or tokens in, rows of tokens, vectors and annotations out, on one of
two engines behind one entry point, `run_corpus`.

    sources.py reading.py rows.py       rows in: where the files are, read and checked as rows
    annotator.py arrow.py               rows through the `elmo` component (and a pipeline)
    precision.py                        one precision plan per run
    outputs.py provenance.py parquet.py summary.py   rows out: the output rules, how it was made
    job.py run.py                       `run_corpus`: the options, checked once, then an engine
    local/                              the local engine: this process, no Ray
    ray/                                the Ray engine: Ray Data's tasks and actors, a run folder

Everything here is imported on first use: Ray's read tasks import `reading` and `rows`, which
must not pay for torch and spaCy."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .annotator import Annotator
    from .job import CorpusJob
    from .provenance import read_provenance
    from .run import run_corpus
    from .summary import RunSummary

__all__ = ["Annotator", "CorpusJob", "RunSummary", "read_provenance", "run_corpus"]
EXPORTS = {
    "Annotator": ".annotator",
    "CorpusJob": ".job",
    "run_corpus": ".run",
    "read_provenance": ".provenance",
    "RunSummary": ".summary",
}


def __getattr__(name: str) -> Any:
    if name in EXPORTS:
        return getattr(import_module(EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
