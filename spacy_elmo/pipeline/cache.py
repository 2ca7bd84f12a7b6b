"""A bounded cache of a frozen biLM's layers, so that training computes each doc's layers once.

With `frozen = true` the layers of a training doc never change, yet spaCy's training loop shows
every doc once per epoch. The cache keys a doc by its token texts and sentence starts (all the
biLM sees), keeps the (L + 1, n, 2P) arrays and evicts the least recently used beyond a byte budget.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from spacy.tokens import Doc
from thinc.types import Floats3d


def doc_key(doc: Doc) -> Hashable:
    """Everything the biLM reads of a doc: its token texts and, if set, its sentence starts."""
    texts = tuple(token.text for token in doc)
    if doc.has_annotation("SENT_START"):
        return texts, tuple(bool(token.is_sent_start) for token in doc)
    return texts


class LayerCache:
    """Least-recently-used map from `doc_key` to layers, holding at most `max_bytes` of arrays."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.n_bytes = 0
        self.hits = 0
        self.misses = 0
        self._layers: OrderedDict[Hashable, Floats3d] = OrderedDict()

    def __len__(self) -> int:
        return len(self._layers)

    def get(self, key: Hashable) -> Floats3d | None:
        layers = self._layers.get(key)
        if layers is None:
            self.misses += 1
            return None
        self.hits += 1
        self._layers.move_to_end(key)
        return layers

    def put(self, key: Hashable, layers: Floats3d) -> None:
        if key in self._layers or layers.nbytes > self.max_bytes:
            return
        self._layers[key] = layers
        self.n_bytes += layers.nbytes
        while self.n_bytes > self.max_bytes:
            _, evicted = self._layers.popitem(last=False)
            self.n_bytes -= evicted.nbytes

    def clear(self) -> None:
        self._layers.clear()
        self.n_bytes = 0
