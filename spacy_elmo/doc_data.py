"""`ElmoDocData` (the value of `doc._.elmo`) and its srsly msgpack encoder/decoder.

This module is loaded through the `srsly_msgpack_encoders`/`srsly_msgpack_decoders` entry points
while spaCy itself is still being imported, so at import time it imports nothing but numpy and
must never fail; the mix (torch) is imported on first use.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

ENCODED_KEY = "__spacy_elmo_doc_data__"


class ElmoDocData:
    """Every biLM layer of every token of one doc, plus the component's mix of them.

    device_layers: (L + 1, n_tokens, 2P) float32 where the component computed them (numpy on the
        CPU, cupy on a GPU); whitespace tokens are all zeros. Listeners read these, so on a GPU
        the layers never travel through host memory unless someone asks for `layers`.
    layers: the same values as a numpy array (on the CPU, the same array; on a GPU, a host copy
        made on first use).
    mix_weights: (L + 1,) float32 summing to gamma: `token._.elmo = mix_weights @ layers[:, i]`.
    """

    def __init__(self, layers: Any, mix_weights: np.ndarray) -> None:
        self.device_layers = layers
        self.mix_weights = np.asarray(mix_weights, dtype=np.float32)

    def __repr__(self) -> str:
        return (
            f"ElmoDocData(layers={tuple(self.device_layers.shape)} float32, mix_weights={self.mix_weights})"
        )

    @functools.cached_property
    def layers(self) -> np.ndarray:
        """(L + 1, n_tokens, 2P) float32 numpy."""
        on_device = self.device_layers
        host = on_device.get() if hasattr(on_device, "get") else on_device  # cupy -> numpy
        return np.asarray(host, dtype=np.float32)

    @functools.cached_property
    def mixed(self) -> np.ndarray:
        """(n_tokens, 2P) float32, read-only: the component's scalar mix of the layers, computed
        once per doc with `bilm.ScalarMix`'s arithmetic (gamma folded into the fixed weights), so
        that `token._.elmo` and the vector hooks only index it."""
        import torch

        from .bilm.scalar_mix import mix_layers

        layers = torch.from_numpy(np.ascontiguousarray(self.layers, dtype=np.float32))
        weights = torch.from_numpy(np.asarray(self.mix_weights, dtype=np.float32))
        mixed = mix_layers(layers, weights, 1.0).numpy()
        mixed.flags.writeable = False
        return mixed

    def to_dict(self) -> dict[str, Any]:
        return {
            "layers": self.layers.astype(np.float32).tobytes(),
            "shape": list(self.layers.shape),
            "mix_weights": self.mix_weights.astype(np.float32).tolist(),
        }

    @classmethod
    def from_dict(cls, message: dict[str, Any]) -> ElmoDocData:
        layers = np.frombuffer(message["layers"], dtype=np.float32).reshape(message["shape"]).copy()
        return cls(layers=layers, mix_weights=np.asarray(message["mix_weights"], dtype=np.float32))


def encode_doc_data(obj: Any, chain: Any = None) -> Any:
    """srsly msgpack encoder for `ElmoDocData` (registered and exposed as an entry point)."""
    if isinstance(obj, ElmoDocData):
        return {ENCODED_KEY: obj.to_dict()}
    return obj if chain is None else chain(obj)


def decode_doc_data(obj: Any, chain: Any = None) -> Any:
    """srsly msgpack decoder for `ElmoDocData`."""
    if isinstance(obj, dict) and ENCODED_KEY in obj:
        return ElmoDocData.from_dict(obj[ENCODED_KEY])
    return obj if chain is None else chain(obj)
