"""Corpora through the `elmo` component: rows of text or tokens in, rows of tokens, vectors and
annotations out. The same code runs in one process (`--engine local`) and inside the Ray Data
mapper (`spacy_elmo.ray_data.ElmoMapper`), so both engines give the same numbers.

`Annotator` is imported on first use: the row checks (`rows`) run in Ray's read tasks, which
must not pay for spaCy and torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .rows import LAYER_CHOICES, BadRowError

if TYPE_CHECKING:
    from .annotator import Annotator

__all__ = ["LAYER_CHOICES", "Annotator", "BadRowError"]


def __getattr__(name: str) -> Any:
    if name == "Annotator":
        from .annotator import Annotator

        return Annotator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
