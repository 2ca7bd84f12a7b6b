"""A bounded LRU cache of token-encoder outputs per word type (char-id row).

The char CNN + highway are most of a small biLM's cost and depend only on the word, so repeated
words should not pay for them twice. Entries are dropped when the encoder's weights change
(any parameter replaced or modified in place) and the cache is bypassed while autograd records.
Threads that run one model share its cache: every read and write holds its lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from . import torch_probes
from .fork_safety import ForkSafeLock


class TokenVectorCache:
    """Maps a char-id row (as bytes) to its (P,) token vector; least recently used out first."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._vectors: OrderedDict[bytes, torch.Tensor] = OrderedDict()
        self._weights_signature: torch_probes.Signature = ()
        self._lock = ForkSafeLock()  # a forked child finds it released; a copy gets its own

    def __len__(self) -> int:
        return len(self._vectors)

    def __getstate__(self) -> dict[str, object]:
        """Pickled and deep-copied (a model shipped to a worker, spaCy's `replace_listeners`)
        with a snapshot of its entries taken under the lock; the copy gets a lock of its own."""
        with self._lock:
            return dict(self.__dict__, _vectors=OrderedDict(self._vectors))

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    def usable_for(self, encoder: nn.Module) -> bool:
        """True when no gradient is recorded for `encoder`; clears itself if its weights changed."""
        if self.max_entries <= 0:
            return False
        parameters = list(encoder.parameters())
        if torch.is_grad_enabled() and any(parameter.requires_grad for parameter in parameters):
            return False
        signature = torch_probes.signature(parameters)
        with self._lock:
            if signature != self._weights_signature:
                self._vectors.clear()
                self._weights_signature = signature
        return True

    def get_many(self, keys: Sequence[bytes]) -> list[torch.Tensor | None]:
        """The (P,) vector of each key, None where there is none; the found ones become the most
        recently used."""
        with self._lock:
            vectors = [self._vectors.get(key) for key in keys]
            for key, vector in zip(keys, vectors):
                if vector is not None:
                    self._vectors.move_to_end(key)
        return vectors

    def put_many(self, keys: Iterable[bytes], vectors: torch.Tensor) -> None:
        """Store rows of `vectors` (N, P) under `keys`, evicting the least recently used."""
        with self._lock:
            for key, vector in zip(keys, vectors):
                self._vectors[key] = vector
            while len(self._vectors) > self.max_entries:
                self._vectors.popitem(last=False)
