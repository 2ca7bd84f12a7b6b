"""Random biLM weight files in the published HDF5 layout, written with h5py + numpy only."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

TINY_OPTIONS = {
    "lstm": {
        "dim": 24,
        "projection_dim": 8,
        "n_layers": 2,
        "cell_clip": 1.5,
        "proj_clip": 0.6,
        "use_skip_connections": True,
    },
    "char_cnn": {
        "embedding": {"dim": 4},
        "filters": [[1, 4], [2, 8], [3, 12]],
        "n_highway": 2,
        "activation": "relu",
        "max_characters_per_token": 50,
        "n_characters": 262,
    },
}


def write_random_elmo(directory: Path, options: dict = TINY_OPTIONS, seed: int = 0) -> tuple[Path, Path]:
    """Write `options.json` and `weights.hdf5`; clips (1.5, 0.6) low enough that both trigger often."""
    rng = np.random.default_rng(seed)
    lstm, cnn = options["lstm"], options["char_cnn"]
    size, projection = lstm["dim"], lstm["projection_dim"]
    d_char = cnn["embedding"]["dim"]
    n_filters = sum(n for _, n in cnn["filters"])

    def normal(*shape: int, std: float) -> np.ndarray:
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    datasets = {"char_embed": normal(261, d_char, std=1.0)}
    for index, (width, n) in enumerate(cnn["filters"]):
        datasets[f"CNN/W_cnn_{index}"] = normal(1, width, d_char, n, std=0.5)
        datasets[f"CNN/b_cnn_{index}"] = normal(n, std=0.1)
    for layer in range(cnn["n_highway"]):
        for name in ("W_carry", "W_transform"):
            datasets[f"CNN_high_{layer}/{name}"] = normal(n_filters, n_filters, std=0.3)
        for name in ("b_carry", "b_transform"):
            datasets[f"CNN_high_{layer}/{name}"] = normal(n_filters, std=0.3)
    datasets["CNN_proj/W_proj"] = normal(n_filters, projection, std=0.3)
    datasets["CNN_proj/b_proj"] = normal(projection, std=0.1)
    for direction in range(2):
        for layer in range(lstm["n_layers"]):
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
            datasets[prefix + "W_0"] = normal(2 * projection, 4 * size, std=0.5)
            datasets[prefix + "B"] = normal(4 * size, std=0.5)
            datasets[prefix + "W_P_0"] = normal(size, projection, std=0.5)
    directory.mkdir(parents=True, exist_ok=True)
    options_file, weight_file = directory / "options.json", directory / "weights.hdf5"
    options_file.write_text(json.dumps(options))
    with h5py.File(weight_file, "w") as handle:
        for name, array in datasets.items():
            handle.create_dataset(name, data=array)
    return options_file, weight_file
