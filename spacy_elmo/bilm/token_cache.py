"""A bounded LRU cache of token-encoder outputs per word type (char-id row).

The char CNN + highway are most of a small biLM's cost and depend only on the word, so repeated
words should not pay for them twice. Entries are dropped when the encoder's weights change
(any parameter replaced or modified in place) and the cache is bypassed while autograd records.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

import torch
from torch import nn


class TokenVectorCache:
    """Maps a char-id row (as bytes) to its (P,) token vector; least recently used out first."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._vectors: OrderedDict[bytes, torch.Tensor] = OrderedDict()
        self._weights_signature: tuple[tuple[int, int], ...] = ()

    def __len__(self) -> int:
        return len(self._vectors)

    def clear(self) -> None:
        self._vectors.clear()

    def usable_for(self, encoder: nn.Module) -> bool:
        """True when no gradient is recorded for `encoder`; clears itself if its weights changed."""
        if self.max_entries <= 0:
            return False
        parameters = list(encoder.parameters())
        if torch.is_grad_enabled() and any(parameter.requires_grad for parameter in parameters):
            return False
        signature = tuple((parameter.data_ptr(), parameter._version) for parameter in parameters)
        if signature != self._weights_signature:
            self._vectors.clear()
            self._weights_signature = signature
        return True

    def get(self, key: bytes) -> torch.Tensor | None:
        vector = self._vectors.get(key)
        if vector is not None:
            self._vectors.move_to_end(key)
        return vector

    def put_many(self, keys: Iterable[bytes], vectors: torch.Tensor) -> None:
        """Store rows of `vectors` (N, P) under `keys`, evicting the least recently used."""
        for key, vector in zip(keys, vectors):
            self._vectors[key] = vector
        while len(self._vectors) > self.max_entries:
            self._vectors.popitem(last=False)
