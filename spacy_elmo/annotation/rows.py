"""One corpus row: its checks (a bad row is named by its id and column) and the output columns
read off its annotated Doc."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from spacy.tokens import Doc

from ..bilm.errors import InputError

# what the `vectors` column holds: every layer (L + 1, n, D), the top one or the layers' mean
# (n, D), the component's scalar mix (n, D, `token._.elmo`), or no vectors at all
LAYER_CHOICES = ("all", "top", "average", "mix", "none")


class BadRowError(InputError):
    """A corpus row whose `text` or `tokens` has the wrong type."""


def row_name(row_id: Any) -> str:
    return "a row without an id" if row_id is None else f"row id {row_id!r}"


def checked_text(row_id: Any, text: Any) -> str:
    if not isinstance(text, str):
        raise BadRowError(
            f'{row_name(row_id)}: column "text" holds {text!r} ({type(text).__name__}), not a string. '
            "Give every row a text string (an empty one is fine)."
        )
    return text


def checked_tokens(row_id: Any, tokens: Any) -> list[str]:
    """A list of token strings; a numpy array of strings (Ray's numpy batches) is accepted too."""
    if isinstance(tokens, np.ndarray):
        tokens = tokens.tolist()
    if not isinstance(tokens, list | tuple) or not all(isinstance(token, str) for token in tokens):
        raise BadRowError(
            f'{row_name(row_id)}: column "tokens" holds {tokens!r} ({type(tokens).__name__}), not a '
            "list of strings."
        )
    if any(not token or token.isspace() for token in tokens):
        raise BadRowError(
            f'{row_name(row_id)}: column "tokens" has an empty or whitespace-only token: remove it.'
        )
    return list(tokens)


def words_column(columns: dict[str, Sequence[Any]]) -> str:
    """`tokens` when the batch has it (pre-tokenised rows), else `text`."""
    for name in ("tokens", "text"):
        if name in columns:
            return name
    raise BadRowError(
        f'the rows have no "text" or "tokens" column (they have: {", ".join(columns) or "none"}): '
        'give each row "text" (a string) or "tokens" (a list of strings).'
    )


def select_vectors(doc: Doc, layers: str) -> np.ndarray:
    """The `vectors` value of one row, float32: (L + 1, n, D) for "all", else (n, D)."""
    data = doc._.elmo
    if layers == "all":
        return data.layers
    if layers == "top":
        return data.layers[-1]
    if layers == "average":
        return data.layers.mean(axis=0)
    return np.asarray(data.mixed)


def entities(doc: Doc) -> list[dict[str, Any]]:
    """Named entities as token offsets: [{"start", "end", "label"}], end exclusive."""
    return [{"start": span.start, "end": span.end, "label": span.label_} for span in doc.ents]


def heads(doc: Doc) -> list[int]:
    """Each token's head as a token index in the row (a root is its own head)."""
    return [token.head.i for token in doc]


def dependencies(doc: Doc) -> list[str]:
    return [token.dep_ for token in doc]
