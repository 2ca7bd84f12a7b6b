"""UTF-8 byte character ids exactly as AllenNLP and bilm-tf compute them.

A token becomes `[BOW] + utf8_bytes[:max_chars - 2] + [EOW] + [PAD]...`, every id shifted by +1 so
that 0 can mean "no token here". Truncation counts bytes, so it may cut a multi-byte character.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .errors import InputError

MAX_CHARACTERS_PER_TOKEN = 50

# Ids before the +1 shift.
BEGINNING_OF_SENTENCE_CHAR = 256
END_OF_SENTENCE_CHAR = 257
BEGINNING_OF_WORD_CHAR = 258
END_OF_WORD_CHAR = 259
PADDING_CHAR = 260

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary_token_ids(boundary_char: int, max_chars: int) -> np.ndarray:
    ids = np.full(max_chars, PADDING_CHAR, dtype=np.int64)
    ids[:3] = (BEGINNING_OF_WORD_CHAR, boundary_char, END_OF_WORD_CHAR)
    return ids + 1


def bos_token_ids(max_chars: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Character ids (max_chars,) of the begin-of-sentence token `<S>`, shifted by +1."""
    return _boundary_token_ids(BEGINNING_OF_SENTENCE_CHAR, max_chars)


def eos_token_ids(max_chars: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Character ids (max_chars,) of the end-of-sentence token `</S>`, shifted by +1."""
    return _boundary_token_ids(END_OF_SENTENCE_CHAR, max_chars)


def token_to_ids(token: str, max_chars: int = MAX_CHARACTERS_PER_TOKEN) -> np.ndarray:
    """Character ids (max_chars,) int64 of one token, shifted by +1 (never 0).

    The literal strings `<S>` and `</S>` map to the sentence boundary ids, as in AllenNLP.
    """
    if token == BOS_TOKEN:
        return bos_token_ids(max_chars)
    if token == EOS_TOKEN:
        return eos_token_ids(max_chars)
    utf8 = np.frombuffer(token.encode("utf-8", "ignore")[: max_chars - 2], dtype=np.uint8)
    ids = np.full(max_chars, PADDING_CHAR + 1, dtype=np.int64)
    ids[0] = BEGINNING_OF_WORD_CHAR + 1
    ids[1 : len(utf8) + 1] = utf8.astype(np.int64) + 1
    ids[len(utf8) + 1] = END_OF_WORD_CHAR + 1
    return ids


def validate_sentences(sentences: object) -> list[Sequence[str]]:
    """Check that `sentences` is a list of lists of str; raise `InputError` naming the culprit."""
    if isinstance(sentences, str | bytes) or not isinstance(sentences, Sequence):
        raise InputError(
            f"Expected a list of sentences (each a list of token strings), got "
            f"{type(sentences).__name__}. Wrap a single sentence as [tokens]."
        )
    for sentence_index, sentence in enumerate(sentences):
        if isinstance(sentence, str | bytes) or not isinstance(sentence, Sequence):
            raise InputError(
                f"Sentence {sentence_index} is a {type(sentence).__name__}, not a list of token "
                "strings. Tokenise it first (e.g. text.split() or a spaCy Doc's token texts)."
            )
        for token_index, token in enumerate(sentence):
            if not isinstance(token, str):
                raise InputError(
                    f"Token {token_index} of sentence {sentence_index} is a "
                    f"{type(token).__name__} ({token!r}), not a str. Pass token texts "
                    "(e.g. token.text for spaCy tokens)."
                )
    return list(sentences)


def batch_to_ids(
    sentences: Sequence[Sequence[str]], max_chars: int = MAX_CHARACTERS_PER_TOKEN
) -> torch.Tensor:
    """Character ids of a batch of tokenised sentences, as AllenNLP's `batch_to_ids`.

    Args:
        sentences: B sentences, each a list of token strings (may be empty).
        max_chars: characters per token, 50 for every published ELMo.
    Returns:
        LongTensor (B, T, max_chars), T the longest sentence; rows past a sentence's end are 0.
        No `<S>`/`</S>` are added: the biLM adds them itself.
    """
    sentences = validate_sentences(sentences)
    max_length = max((len(sentence) for sentence in sentences), default=0)
    char_ids = np.zeros((len(sentences), max_length, max_chars), dtype=np.int64)
    ids_of_type: dict[str, np.ndarray] = {}
    for row, sentence in enumerate(sentences):
        for position, token in enumerate(sentence):
            ids = ids_of_type.get(token)
            if ids is None:
                ids = ids_of_type[token] = token_to_ids(token, max_chars)
            char_ids[row, position] = ids
    return torch.from_numpy(char_ids)
