"""Our model directory: `config.json` (AllenNLP options inside) + `model.safetensors`. No pickle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..config import BiLMConfig
from ..errors import ConfigError, WeightFileError
from .atomic import atomic_path, atomic_write_text

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT_NAME = "spacy-elmo-bilm"
FORMAT_VERSION = 1


def save_model_dir(path: str | Path, config: BiLMConfig, state_dict: dict[str, torch.Tensor]) -> None:
    """Write the weights, then the config, each atomically (other files in `path` are kept)."""
    path = Path(path)
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in state_dict.items()}
    with atomic_path(path / WEIGHTS_FILE) as temporary:
        save_file(tensors, str(temporary), metadata={"format": "pt"})
    document: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "options": config.to_allennlp_options(),
    }
    atomic_write_text(path / CONFIG_FILE, json.dumps(document, indent=2) + "\n")


def read_model_config(path: str | Path) -> BiLMConfig:
    """The `BiLMConfig` of a model directory."""
    config_path = Path(path) / CONFIG_FILE
    if not Path(path).is_dir():
        what = "is a file, not a model directory" if Path(path).is_file() else "does not exist"
        raise ConfigError(f"Model directory {path} {what}.")
    if not config_path.exists():
        raise ConfigError(
            f"{path} is not a spacy-elmo model directory: {CONFIG_FILE} is missing. For AllenNLP's "
            "options.json + weights.hdf5, convert them with `spacy-elmo convert OPTIONS WEIGHTS "
            "OUTPUT_DIR` or load them with BiLM.from_allennlp(options_file, weight_file)."
        )
    try:
        document = json.loads(config_path.read_text(encoding="utf8"))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{config_path} is not valid JSON: {error}.") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
        raise ConfigError(f'{config_path} is not a spacy-elmo biLM config (no "format": "{FORMAT_NAME}").')
    if document.get("format_version") != FORMAT_VERSION:
        raise ConfigError(
            f"{config_path} has format_version {document.get('format_version')!r}; this version of "
            f"spacy-elmo reads version {FORMAT_VERSION}. Upgrade spacy-elmo."
        )
    if "options" not in document:
        raise ConfigError(f"{config_path}: missing field 'options'.")
    return BiLMConfig.from_allennlp_options(document["options"], source=str(config_path))


def load_model_dir(path: str | Path) -> tuple[BiLMConfig, dict[str, torch.Tensor]]:
    """Read a model directory; every tensor is checked against the config's shapes."""
    from ..model import BiLM

    config = read_model_config(path)
    weights_path = Path(path) / WEIGHTS_FILE
    if not weights_path.exists():
        raise WeightFileError(f"{path}: {WEIGHTS_FILE} is missing.")
    try:
        tensors = load_file(str(weights_path))
    except (SafetensorError, OSError) as error:
        raise WeightFileError(f"{weights_path} is not a readable safetensors file: {error}.") from None
    expected = {name: tuple(tensor.shape) for name, tensor in BiLM(config).state_dict().items()}
    check_state_dict(tensors, expected, str(weights_path))
    return config, tensors


def check_state_dict(
    tensors: dict[str, torch.Tensor], expected: dict[str, tuple[int, ...]], source: str
) -> None:
    """Raise `WeightFileError` naming the first missing, unexpected or wrongly shaped tensor."""
    for name, shape in expected.items():
        if name not in tensors:
            raise WeightFileError(
                f"{source} has no tensor {name!r}; the file is incomplete or from another model."
            )
        if tuple(tensors[name].shape) != shape:
            raise WeightFileError(
                f"{source}: tensor {name!r} has shape {tuple(tensors[name].shape)}, the config "
                f"expects {shape}. The config and the weights do not belong together."
            )
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise WeightFileError(
            f"{source} has tensor {unexpected[0]!r} that the config does not describe "
            f"({len(unexpected)} unexpected in all)."
        )
