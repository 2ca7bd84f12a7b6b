"""AllenNLP / bilm-tf HDF5 weights in and out.

Our parameters keep the file's conventions (gate order, highway gate meaning, bias without the
forget +1), so every transform is slicing and transposing: import and export are exact inverses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch

from ..config import BiLMConfig
from ..errors import ConfigError, WeightFileError
from ..lstm import DIRECTION_NAMES
from .atomic import atomic_path
from .file_names import ALLENNLP_OPTIONS_FILE, ALLENNLP_WEIGHTS_FILE  # noqa: F401  (re-exported)
from .state_dict import check_finite


@dataclass(frozen=True)
class _Dataset:
    """One HDF5 dataset: its file shape, and how it maps to model parameter(s)."""

    name: str
    shape: tuple[int, ...]
    to_model: Callable[[np.ndarray], dict[str, np.ndarray]]
    from_model: Callable[[dict[str, torch.Tensor]], np.ndarray]


def _transposed(parameter: str) -> tuple[Callable, Callable]:
    return (
        lambda array: {parameter: array.T},
        lambda state: state[parameter].numpy().T,
    )


def _as_is(parameter: str) -> tuple[Callable, Callable]:
    return (lambda array: {parameter: array}, lambda state: state[parameter].numpy())


def _stacked(first: str, second: str, split: int, transpose: bool) -> tuple[Callable, Callable]:
    """File array split along axis 0 at `split` into two parameters (each optionally transposed)."""

    def to_model(array: np.ndarray) -> dict[str, np.ndarray]:
        head, tail = array[:split], array[split:]
        return {first: head.T, second: tail.T} if transpose else {first: head, second: tail}

    def from_model(state: dict[str, torch.Tensor]) -> np.ndarray:
        head, tail = state[first].numpy(), state[second].numpy()
        return np.concatenate([head.T, tail.T] if transpose else [head, tail])

    return to_model, from_model


def _highway_half(parameter: str, half: int, width: int, transpose: bool) -> tuple[Callable, Callable]:
    """One of the highway's two maps, stored in rows [half * F, (half + 1) * F) of `parameter`."""
    rows = slice(half * width, (half + 1) * width)

    def to_model(array: np.ndarray) -> dict[str, np.ndarray]:
        return {f"{parameter}[{half}]": array.T if transpose else array}

    def from_model(state: dict[str, torch.Tensor]) -> np.ndarray:
        block = state[parameter][rows].numpy()
        return block.T if transpose else block

    return to_model, from_model


def allennlp_layout(config: BiLMConfig) -> list[_Dataset]:
    """Every dataset of the published HDF5 layout for `config`, with its expected shape."""
    if config.uses_lexicon:
        raise ConfigError(
            "AllenNLP's HDF5 layout holds byte models only: this config reads a character lexicon "
            "(char_cnn.vocabulary 'lexicon', ELMoForManyLangs). Keep such a model as our model directory."
        )
    width, projection, cell = config.n_filters, config.projection_dim, config.lstm_dim
    datasets = [
        _Dataset("char_embed", (261, config.char_embedding_dim), *_as_is("token_encoder.char_embedding"))
    ]
    for index, (kernel_width, n_filters) in enumerate(config.filters):
        prefix = f"token_encoder.convolutions.{index}"
        datasets.append(
            _Dataset(
                f"CNN/W_cnn_{index}",
                (1, kernel_width, config.char_embedding_dim, n_filters),
                lambda array, prefix=prefix: {f"{prefix}.weight": array[0].transpose(2, 1, 0)},
                lambda state, prefix=prefix: state[f"{prefix}.weight"].numpy().transpose(2, 1, 0)[None],
            )
        )
        datasets.append(_Dataset(f"CNN/b_cnn_{index}", (n_filters,), *_as_is(f"{prefix}.bias")))
    for index in range(config.n_highway):
        linear = f"token_encoder.highways.{index}.linear"
        for half, (weight, bias) in enumerate((("W_transform", "b_transform"), ("W_carry", "b_carry"))):
            datasets.append(
                _Dataset(
                    f"CNN_high_{index}/{weight}",
                    (width, width),
                    *_highway_half(f"{linear}.weight", half, width, True),
                )
            )
            datasets.append(
                _Dataset(
                    f"CNN_high_{index}/{bias}", (width,), *_highway_half(f"{linear}.bias", half, width, False)
                )
            )
    datasets.append(
        _Dataset("CNN_proj/W_proj", (width, projection), *_transposed("token_encoder.projection.weight"))
    )
    datasets.append(_Dataset("CNN_proj/b_proj", (projection,), *_as_is("token_encoder.projection.bias")))
    for direction, stack in enumerate(DIRECTION_NAMES):
        for layer in range(config.n_layers):
            cell_path = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            prefix = f"{stack}.layers.{layer}"
            datasets += [
                _Dataset(
                    f"{cell_path}/W_0",
                    (2 * projection, 4 * cell),
                    *_stacked(f"{prefix}.input_weight", f"{prefix}.recurrent_weight", projection, False),
                ),
                _Dataset(f"{cell_path}/B", (4 * cell,), *_as_is(f"{prefix}.bias")),
                _Dataset(f"{cell_path}/W_P_0", (cell, projection), *_as_is(f"{prefix}.projection_weight")),
            ]
    return datasets


def _merge_highway_halves(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Join `name[0]`/`name[1]` entries (transform rows, gate rows) into one parameter."""
    merged = {name: array for name, array in arrays.items() if not name.endswith("]")}
    halves = sorted(name for name in arrays if name.endswith("]"))
    for name in {half[: -len("[0]")] for half in halves}:
        merged[name] = np.concatenate([arrays[f"{name}[0]"], arrays[f"{name}[1]"]])
    return merged


def load_allennlp_weights(config: BiLMConfig, weight_file: str | Path) -> dict[str, torch.Tensor]:
    """Read an HDF5 weight file into our state dict, checking every dataset against `config`."""
    weight_file = Path(weight_file)
    if not weight_file.is_file():
        what = "is a directory, not a file" if weight_file.is_dir() else "does not exist"
        raise WeightFileError(f"Weight file {weight_file} {what}.")
    layout = allennlp_layout(config)
    arrays: dict[str, np.ndarray] = {}
    try:
        handle = h5py.File(weight_file, "r")
    except OSError:
        hint = " (it looks like JSON: the options file comes first)" if _looks_like_json(weight_file) else ""
        raise WeightFileError(f"Weight file {weight_file} is not a readable HDF5 file{hint}.") from None
    with handle:
        found = _dataset_names(handle)
        for dataset in layout:
            if dataset.name not in handle:
                raise WeightFileError(
                    f"{weight_file} has no dataset {dataset.name!r}, which the options require. "
                    "Check that the options file belongs to this weight file."
                )
            array = handle[dataset.name][...]
            if array.shape != dataset.shape:
                raise WeightFileError(
                    f"{weight_file}: dataset {dataset.name!r} has shape {array.shape}, but the "
                    f"options describe {dataset.shape}. The options file does not match the weights."
                )
            if not np.issubdtype(array.dtype, np.floating):
                raise WeightFileError(
                    f"{weight_file}: dataset {dataset.name!r} has dtype {array.dtype}; expected float32."
                )
            array = array.astype(np.float32, copy=False)
            check_finite(torch.from_numpy(array), dataset.name, str(weight_file))
            arrays.update(dataset.to_model(array))
        extra = sorted(found - {dataset.name for dataset in layout})
        if extra:
            raise WeightFileError(
                f"{weight_file} has dataset {extra[0]!r} that the options do not describe "
                f"({len(extra)} unexpected in all). The options file does not match the weights "
                "(check n_highway, filters and n_layers)."
            )
    merged = _merge_highway_halves(arrays)
    return {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in merged.items()}


def save_allennlp_weights(
    state_dict: dict[str, torch.Tensor], config: BiLMConfig, weight_file: str | Path
) -> None:
    """Write our state dict in the published HDF5 layout (float32), atomically."""
    state = {name: tensor.detach().cpu().float() for name, tensor in state_dict.items()}
    with atomic_path(Path(weight_file)) as temporary, h5py.File(temporary, "w") as handle:
        for dataset in allennlp_layout(config):
            handle.create_dataset(
                dataset.name, data=np.ascontiguousarray(dataset.from_model(state), dtype=np.float32)
            )


def _dataset_names(handle: h5py.File) -> set[str]:
    names: set[str] = set()
    handle.visititems(lambda name, item: names.add(name) if isinstance(item, h5py.Dataset) else None)
    return names


def _looks_like_json(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(64).lstrip().startswith(b"{")
