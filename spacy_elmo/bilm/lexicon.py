"""A model's own character (and word) lexicon: text -> ids for biLMs that do not read UTF-8 bytes.

ELMoForManyLangs models give each character (a Unicode code point, not a byte) a row of their
embedding table; a character outside the lexicon reads as the unknown row. They may add a word
embedding, looked up by the whole (cut) token. In our files the rows that play a role come first,
at fixed places, so the biLM itself needs no lexicon to add the sentence boundaries:

- characters: row 0 padding, 1 word start, 2 word end, 3 sentence start, 4 sentence end,
  5 unknown, then the other characters;
- words: row 0 sentence start, 1 sentence end, 2 unknown, then the other words.

As with bytes, an id in a char-id or word-id tensor is its row + 1, and 0 means "no token here".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .chars import validate_sentences
from .errors import ConfigError, check_document_format

(
    PADDING_ROW,
    WORD_START_ROW,
    WORD_END_ROW,
    SENTENCE_START_ROW,
    SENTENCE_END_ROW,
    UNKNOWN_CHARACTER_ROW,
) = range(6)
CHARACTER_ROLE_ROWS = 6
"""Character rows 0..5 play the roles above; the lexicon's characters start at row 6."""
SENTENCE_START_WORD_ROW, SENTENCE_END_WORD_ROW, UNKNOWN_WORD_ROW = range(3)
WORD_ROLE_ROWS = 3
PADDING_ID = PADDING_ROW + 1
"""The id of the character that fills a token's row after its end-of-word character."""
SENTENCE_START_WORD_ID = SENTENCE_START_WORD_ROW + 1
SENTENCE_END_WORD_ID = SENTENCE_END_WORD_ROW + 1
TOKEN_CACHE_ENTRIES = 200_000
"""Token texts whose ids a lexicon keeps, so that frequent words are looked up once."""
LEXICON_FORMAT = "spacy-elmo-lexicon"
LEXICON_FORMAT_VERSION = 1


def boundary_token_ids(sentence_row: int, max_chars: int) -> np.ndarray:
    """Char ids (max_chars,) of a sentence-boundary token: word start, the marker, word end, padding."""
    ids = np.full(max_chars, PADDING_ID, dtype=np.int64)
    ids[:3] = (WORD_START_ROW + 1, sentence_row + 1, WORD_END_ROW + 1)
    return ids


@dataclass(frozen=True)
class Lexicon:
    """Characters and, for a model with a word embedding, words, each mapped to its table row.

    characters (Mapping[str, int]): entry -> row. Entries longer than one character, such as
        ELMoForManyLangs' own `<bos>` (row 3), never match a character of a token: they are kept
        as the files had them.
    words (Optional[Mapping[str, int]]): word -> row; None without a word embedding.
    boundary_tokens (tuple[str, str]): token texts read as the sentence start and end markers,
        as the model's own tools read them (`<bos>` and `<eos>` for ELMoForManyLangs).
    max_characters_per_token (int): C; a token is cut to C - 2 characters.
    """

    characters: Mapping[str, int]
    words: Mapping[str, int] | None
    boundary_tokens: tuple[str, str]
    max_characters_per_token: int
    _token_cache: dict[str, tuple[np.ndarray, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for kind, table in (("characters", self.characters), ("words", self.words)):
            bad = [entry for entry, row in (table or {}).items() if not _is_row(row)]
            if bad:
                raise ConfigError(
                    f"The lexicon's {kind} entry {bad[0]!r} has row {(table or {})[bad[0]]!r}: rows "
                    "are non-negative integers."
                )
        max_chars = self.max_characters_per_token
        if not isinstance(max_chars, int) or isinstance(max_chars, bool) or max_chars < 3:
            raise ConfigError(
                f"The lexicon's max_characters_per_token is {self.max_characters_per_token}: it must be "
                "at least 3 (word start, one character, word end)."
            )

    @property
    def n_character_rows(self) -> int:
        """The character table's rows this lexicon needs: the highest row + 1."""
        return max(self.characters.values(), default=CHARACTER_ROLE_ROWS - 1) + 1

    @property
    def n_word_rows(self) -> int:
        """The word table's rows this lexicon needs (0 without words)."""
        if self.words is None:
            return 0
        return max(self.words.values(), default=WORD_ROLE_ROWS - 1) + 1

    def token_ids(self, token: str) -> tuple[np.ndarray, int]:
        """One token's char ids (C,) int64 and word id (0 without words), each row + 1.

        The token is cut to C - 2 characters; the word is looked up by the cut text. The texts
        of `boundary_tokens` read as the sentence markers.
        """
        cached = self._token_cache.get(token)
        if cached is not None:
            return cached
        max_chars = self.max_characters_per_token
        if token in self.boundary_tokens:
            is_start = token == self.boundary_tokens[0]
            char_ids = boundary_token_ids(SENTENCE_START_ROW if is_start else SENTENCE_END_ROW, max_chars)
            word_row = SENTENCE_START_WORD_ROW if is_start else SENTENCE_END_WORD_ROW
        else:
            cut = token[: max_chars - 2]
            char_ids = np.full(max_chars, PADDING_ID, dtype=np.int64)
            char_ids[0] = WORD_START_ROW + 1
            char_ids[1 : len(cut) + 1] = [
                self.characters.get(char, UNKNOWN_CHARACTER_ROW) + 1 for char in cut
            ]
            char_ids[len(cut) + 1] = WORD_END_ROW + 1
            word_row = UNKNOWN_WORD_ROW if self.words is None else self.words.get(cut, UNKNOWN_WORD_ROW)
        ids = (char_ids, word_row + 1 if self.words is not None else 0)
        if len(self._token_cache) < TOKEN_CACHE_ENTRIES:
            self._token_cache[token] = ids
        return ids

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Char ids and word ids of a batch of tokenised sentences, as `chars.batch_to_ids` for bytes.

        Args:
            sentences: B sentences, each a list of token strings (may be empty).
        Returns:
            char_ids: LongTensor (B, T, C), T the longest sentence; rows past a sentence's end are 0.
            word_ids: LongTensor (B, T), 0 past a sentence's end; None without a word embedding.
            No sentence markers are added: the biLM adds them itself.
        """
        sentences = validate_sentences(sentences)
        max_length = max((len(sentence) for sentence in sentences), default=0)
        char_ids = np.zeros((len(sentences), max_length, self.max_characters_per_token), dtype=np.int64)
        word_ids = np.zeros((len(sentences), max_length), dtype=np.int64)
        for row, sentence in enumerate(sentences):
            for position, token in enumerate(sentence):
                char_ids[row, position], word_ids[row, position] = self.token_ids(token)
        return torch.from_numpy(char_ids), torch.from_numpy(word_ids) if self.words is not None else None

    # -- our lexicon file ------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        """The JSON document of `lexicon.json` (and of the pipeline's serialised biLM)."""
        return {
            "format": LEXICON_FORMAT,
            "format_version": LEXICON_FORMAT_VERSION,
            "max_characters_per_token": self.max_characters_per_token,
            "boundary_tokens": list(self.boundary_tokens),
            "characters": dict(self.characters),
            "words": None if self.words is None else dict(self.words),
        }

    @classmethod
    def from_document(cls, document: Any, source: str) -> Lexicon:
        """Read what `to_document` wrote; `ConfigError` naming `source` and the field otherwise."""
        check_document_format(document, source, LEXICON_FORMAT, LEXICON_FORMAT_VERSION, "lexicon")
        for key in ("max_characters_per_token", "boundary_tokens", "characters", "words"):
            if key not in document:
                raise ConfigError(f"{source}: missing field {key!r}.")
        boundary_tokens = document["boundary_tokens"]
        if not (
            isinstance(boundary_tokens, list)
            and len(boundary_tokens) == 2
            and all(isinstance(token, str) for token in boundary_tokens)
        ):
            raise ConfigError(f"{source}: boundary_tokens must be two strings, found {boundary_tokens!r}.")
        tables = {key: document[key] for key in ("characters", "words")}
        for key, table in tables.items():
            if table is None and key == "words":
                continue
            if not isinstance(table, dict):
                raise ConfigError(
                    f"{source}: {key} must be an object of entry -> row, found {type(table).__name__}."
                )
        try:
            return cls(
                characters=tables["characters"],
                words=tables["words"],
                boundary_tokens=(boundary_tokens[0], boundary_tokens[1]),
                max_characters_per_token=document["max_characters_per_token"],
            )
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None


def _is_row(row: object) -> bool:
    return isinstance(row, int) and not isinstance(row, bool) and row >= 0
