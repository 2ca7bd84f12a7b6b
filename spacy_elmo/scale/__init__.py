"""Corpus jobs of any size on a Ray cluster: `run_corpus` reads the input with Ray's tasks,
embeds or annotates it on actors that write one output part per input block, resumes a run whose
process died, checks that every input row is in the output exactly once, and records how the
output was made in every file. Needs `pip install "spacy-elmo[ray]"`.

`run_corpus` is imported on first use: a Ray task that needs only `layout` (the completeness
check) must not pay for torch and spaCy, which `engine` imports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import CorpusJob, run_corpus

__all__ = ["CorpusJob", "run_corpus"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
