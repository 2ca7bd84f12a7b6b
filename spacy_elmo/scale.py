"""Deprecated: `spacy_elmo.scale.run_corpus` is `spacy_elmo.corpus.run_corpus(..., engine="ray")`
since 0.2.0, one entry point for both engines. This alias goes in 0.3.0."""

from __future__ import annotations

import warnings
from typing import Any


def run_corpus(source: Any, output: Any, **options: Any) -> Any:
    """`spacy_elmo.corpus.run_corpus` on the Ray engine, with a `DeprecationWarning`."""
    from .corpus import run_corpus as run_on_either_engine

    warnings.warn(
        'spacy_elmo.scale.run_corpus moved: use spacy_elmo.corpus.run_corpus(..., engine="ray").',
        DeprecationWarning,
        stacklevel=2,
    )
    return run_on_either_engine(source, output, engine="ray", **options)
