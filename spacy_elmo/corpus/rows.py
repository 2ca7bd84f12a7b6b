"""One corpus row: its checks (a bad row is named by its id and column) and the output columns
read off its annotated Doc."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..bilm.errors import InputError
from .layer_choice import LAYER_CHOICES, LayerChoice  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from spacy.tokens import Doc


class BadRowError(InputError):
    """A corpus row or batch that cannot be read as given: a `text` or `tokens` of the wrong type or
    with a lone surrogate, a row with neither, columns of different lengths, an unknown source."""


def row_name(row_id: Any) -> str:
    return "a row without an id" if row_id is None else f"row id {row_id!r}"


# where the words of a row come from: its text (tokenised by the pipeline) or its tokens
SOURCES = ("text", "tokens")


def check_source(source: str) -> None:
    if source not in SOURCES:
        raise BadRowError(
            f'source "{source}": the words of a row come from "text" or "tokens": pass one of them as '
            "the source (rows.words_column names the one a batch of rows has)."
        )


def check_encodable(row_id: Any, column: str, text: str) -> None:
    """Refuse a lone surrogate (e.g. a JSON "\\ud800" escape without its pair): it is no Unicode
    character, and no output file can hold it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BadRowError(
            f'{row_name(row_id)}: column "{column}" holds a lone surrogate '
            f"({text[error.start]!r} at character {error.start}), which is not text: fix or remove it "
            "(in JSON, a \\ud800-\\udfff escape needs its pair)."
        ) from None


def checked_text(row_id: Any, text: Any) -> str:
    if not isinstance(text, str):
        raise BadRowError(
            f'{row_name(row_id)}: column "text" holds {text!r} ({type(text).__name__}), not a string. '
            "Give every row a text string (an empty one is fine)."
        )
    check_encodable(row_id, "text", text)
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
    for token in tokens:
        check_encodable(row_id, "tokens", token)
    return list(tokens)


def words_column(columns: Mapping[str, Sequence[Any]]) -> str:
    """`tokens` when the batch has it (pre-tokenised rows), else `text`. A batch that mixes the two
    forms row by row goes through `row_words` (`Annotator.annotate_columns`) instead."""
    for name in ("tokens", "text"):
        if name in columns:
            return name
    raise BadRowError(
        f'the rows have no "text" or "tokens" column (they have: {", ".join(columns) or "none"}): '
        'give each row "text" (a string) or "tokens" (a list of strings).'
    )


def row_words(row_id: Any, text: Any, tokens: Any) -> tuple[str, Any]:
    """A row's source column and value where a batch may mix the two forms: its `tokens` where it
    has them, else its `text` (None stands for a column the row lacks)."""
    if tokens is not None:
        return "tokens", tokens
    if text is None:
        raise BadRowError(
            f'{row_name(row_id)} has neither "text" nor "tokens": give it a text string or a list of '
            "token strings."
        )
    return "text", text


def row_count(columns: Mapping[str, Sequence[Any]]) -> int:
    """The number of rows of a batch whose columns must all have one value per row."""
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        shortest, longest = min(lengths, key=lengths.__getitem__), max(lengths, key=lengths.__getitem__)
        raise BadRowError(
            f'column "{shortest}" has {lengths[shortest]} values but column "{longest}" has '
            f"{lengths[longest]}: give every column one value per row (an id for every row)."
        )
    return next(iter(lengths.values()), 0)


def select_vectors(doc: Doc, layers: str) -> np.ndarray:
    """The `vectors` value of one row, float32: (L + 1, n, D) for "all", else (n, D)."""
    if layers == "mix":
        return np.asarray(doc._.elmo.mixed)
    return select_layers(doc._.elmo.layers, layers)


def select_layers(layers: np.ndarray, choice: str) -> np.ndarray:
    """(L + 1, n, D) -> all of it ("all"), the top layer or the layers' mean ("top", "average": (n, D))."""
    if choice == "top":
        return layers[-1]
    if choice == "average":
        return layers.mean(axis=0)
    return layers


def entities(doc: Doc) -> list[dict[str, Any]]:
    """Named entities as token offsets: [{"start", "end", "label"}], end exclusive."""
    return [{"start": span.start, "end": span.end, "label": span.label_} for span in doc.ents]


def heads(doc: Doc) -> list[int]:
    """Each token's head as a token index in the row (a root is its own head)."""
    return [token.head.i for token in doc]


def dependencies(doc: Doc) -> list[str]:
    return [token.dep_ for token in doc]
