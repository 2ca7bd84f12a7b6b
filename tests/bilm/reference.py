"""An independent numpy ELMo, written from the spec straight onto the HDF5 arrays.

It shares no code with `spacy_elmo.bilm`: it reads the TensorFlow layout as stored (gate order
i, j, f, o; forget bias added at run time; highway "carry" gate weighting the transform), runs one
sentence at a time in float64, and builds char ids and boundaries by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

BOW, EOW, PAD, BOS, EOS = 259, 260, 261, 257, 258  # already shifted by +1


def word_ids(word: str) -> list[int]:
    if word in ("<S>", "</S>"):
        middle = [BOS if word == "<S>" else EOS]
    else:
        middle = [byte + 1 for byte in word.encode("utf-8")[:48]]
    ids = [BOW, *middle, EOW]
    return ids + [PAD] * (50 - len(ids))


def _sigmoid(values: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-values))


class NumpyELMo:
    def __init__(self, options_file: Path, weight_file: Path) -> None:
        options = json.loads(Path(options_file).read_text())
        self.lstm_options = options["lstm"]
        self.cnn_options = options["char_cnn"]
        with h5py.File(weight_file, "r") as handle:
            self.weights = {}
            handle.visititems(
                lambda name, item: (
                    self.weights.__setitem__(name, item[...].astype(np.float64))
                    if isinstance(item, h5py.Dataset)
                    else None
                )
            )

    def token_vector(self, ids: list[int]) -> np.ndarray:
        weights = self.weights
        table = np.vstack([np.zeros((1, weights["char_embed"].shape[1])), weights["char_embed"]])
        embedded = table[np.array(ids)]  # (50, d)
        pooled = []
        for index, (width, _) in enumerate(self.cnn_options["filters"]):
            kernel = weights[f"CNN/W_cnn_{index}"][0]  # (width, d, n)
            positions = [
                sum(embedded[start + k] @ kernel[k] for k in range(width)) for start in range(50 - width + 1)
            ]
            pooled.append(np.maximum(np.max(positions, axis=0) + weights[f"CNN/b_cnn_{index}"], 0.0))
        hidden = np.concatenate(pooled)
        for layer in range(self.cnn_options["n_highway"]):
            prefix = f"CNN_high_{layer}/"
            carry = _sigmoid(hidden @ weights[prefix + "W_carry"] + weights[prefix + "b_carry"])
            transformed = np.maximum(
                hidden @ weights[prefix + "W_transform"] + weights[prefix + "b_transform"], 0
            )
            hidden = carry * transformed + (1 - carry) * hidden
        return hidden @ weights["CNN_proj/W_proj"] + weights["CNN_proj/b_proj"]

    def run_direction(self, direction: int, inputs: np.ndarray, states: list) -> tuple[list, list]:
        """inputs (n, P) in processing order; states [(h, c)] per layer -> outputs per layer, finals."""
        clip_cell, clip_proj = self.lstm_options["cell_clip"], self.lstm_options["proj_clip"]
        layer_input, outputs, finals = inputs, [], []
        for layer, (hidden, cell) in enumerate(states):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            kernel, bias, projection = (self.weights[prefix + n] for n in ("W_0", "B", "W_P_0"))
            size = bias.shape[0] // 4
            rows = []
            for x in layer_input:
                z = np.concatenate([x, hidden]) @ kernel + bias
                i, j, f, o = (z[k * size : (k + 1) * size] for k in range(4))
                cell = np.clip(_sigmoid(f + 1.0) * cell + _sigmoid(i) * np.tanh(j), -clip_cell, clip_cell)
                hidden = np.clip((_sigmoid(o) * np.tanh(cell)) @ projection, -clip_proj, clip_proj)
                rows.append(hidden)
            output = np.array(rows).reshape(len(layer_input), -1)
            if self.lstm_options["use_skip_connections"] and layer > 0:
                output = output + layer_input
            outputs.append(output)
            finals.append((hidden, cell))
            layer_input = output
        return outputs, finals

    def zero_states(self) -> list:
        n_layers = self.lstm_options["n_layers"]
        size, projection = self.lstm_options["dim"], self.lstm_options["projection_dim"]
        return [[(np.zeros(projection), np.zeros(size)) for _ in range(n_layers)] for _ in range(2)]

    def embed(self, tokens: list[str], states: list | None = None) -> tuple[np.ndarray, list]:
        """tokens -> layers (L + 1, n, 2P) without boundaries, and final [direction][layer] states."""
        states = states if states is not None else self.zero_states()
        vectors = np.array([self.token_vector(word_ids(w)) for w in ["<S>", *tokens, "</S>"]])
        forward, forward_final = self.run_direction(0, vectors, states[0])
        backward, backward_final = self.run_direction(1, vectors[::-1], states[1])
        layers = [np.concatenate([vectors, vectors], axis=1)] + [
            np.concatenate([f, b[::-1]], axis=1) for f, b in zip(forward, backward)
        ]
        return np.array(layers)[:, 1:-1], [forward_final, backward_final]
