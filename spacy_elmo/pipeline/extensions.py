"""`doc._.elmo` and `token._.elmo`, their msgpack hooks, and the opt-in vector hooks.

`doc._.elmo` holds an `ElmoDocData` (spacy_elmo/doc_data.py): plain numpy (or, on a GPU, cupy)
arrays only (no torch tensors, no autograd graph), so it survives `doc.to_bytes()` and
`DocBin(store_user_data=True)` and is released by spaCy's `doc_cleaner` with
`attrs = {"_.elmo": None}`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from spacy.tokens import Doc, Span, Token


def token_elmo(token: Token) -> np.ndarray | None:
    """`token._.elmo`: the (2P,) mixed vector, or None when the doc has no ELMo data."""
    data = token.doc._.elmo
    return None if data is None else data.mixed[token.i].copy()


def install_extensions() -> None:
    """Register `doc._.elmo` and `token._.elmo` once per process (idempotent)."""
    if not Doc.has_extension("elmo"):
        Doc.set_extension("elmo", default=None)
    if not Token.has_extension("elmo"):
        Token.set_extension("elmo", getter=token_elmo)


# -- opt-in vector and similarity hooks --------------------------------------------------------


def _token_vector(token: Token) -> np.ndarray:
    return token._.elmo


def _span_vector(span: Span) -> np.ndarray:
    mixed = span.doc._.elmo.mixed[span.start : span.end]
    return mixed.mean(axis=0) if len(mixed) else np.zeros(mixed.shape[1], dtype=np.float32)


def _doc_vector(doc: Doc) -> np.ndarray:
    return _span_vector(doc[:])


def _has_vector(_: Any) -> bool:
    return True


def _cosine(first: np.ndarray, second: np.ndarray) -> float:
    norms = float(np.linalg.norm(first) * np.linalg.norm(second))
    return float(np.dot(first, second) / norms) if norms else 0.0


def _similarity(first: Doc | Span | Token, second: Doc | Span | Token) -> float:
    return _cosine(first.vector, second.vector)


def set_vector_hooks(doc: Doc) -> None:
    """Make `.vector`, `.has_vector` and `.similarity()` of the doc, its spans and tokens use the
    ELMo mix (span and doc vectors are token means; similarity is cosine, 0 for zero vectors).

    Hooks live on the Doc object only: `doc.to_bytes()`/`DocBin` and `nlp.pipe(n_process > 1)`
    do not carry them (a spaCy limitation); `doc._.elmo` itself is carried.
    """
    doc.user_hooks.update({"vector": _doc_vector, "has_vector": _has_vector, "similarity": _similarity})
    doc.user_span_hooks.update({"vector": _span_vector, "has_vector": _has_vector, "similarity": _similarity})
    doc.user_token_hooks.update(
        {"vector": _token_vector, "has_vector": _has_vector, "similarity": _similarity}
    )
