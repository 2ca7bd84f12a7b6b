"""The model directory: the one place that names its files and reads and writes them. No pickle.

- `config.json`: `{"format": "spacy-elmo-bilm", "format_version": 1, "options": {...}}` with the
  biLM's AllenNLP options;
- `model.safetensors`: the biLM's state dict, one tensor per LSTM direction;
- `lexicon.json` (lexicon models only: ELMoForManyLangs): the characters and words with their
  table rows (`Lexicon.to_document`), which turn text into ids;
- `lm_head.safetensors` + `vocab.txt` (written by pretraining, optional): the softmax head and its
  vocabulary, one word a line, that fine-tuning and evaluation continue from;
- `training.cfg` (written by pretraining, optional): the config of the run that wrote the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..config import BiLMConfig
from ..errors import ConfigError, WeightFileError, check_document_format
from ..lexicon import Lexicon
from .atomic import atomic_save_tensors, atomic_write_text
from .file_names import (
    CONFIG_FILE,
    HEAD_FILE,
    LEXICON_FILE,
    TRAINING_CONFIG_FILE,  # noqa: F401  (re-exported)
    VOCAB_FILE,
    WEIGHTS_FILE,
)
from .state_dict import StateDictShapes, check_state_dict, softmax_head_state_dict_shapes

FORMAT_NAME = "spacy-elmo-bilm"
FORMAT_VERSION = 1


def save_model_dir(
    path: str | Path,
    config: BiLMConfig,
    state_dict: dict[str, torch.Tensor],
    lexicon: Lexicon | None = None,
) -> None:
    """Write the weights, the lexicon if any, then the config, each atomically (other files in
    `path` are kept)."""
    path = Path(path)
    atomic_save_tensors(path / WEIGHTS_FILE, state_dict)
    if lexicon is not None:
        atomic_write_text(path / LEXICON_FILE, json.dumps(lexicon.to_document(), ensure_ascii=False) + "\n")
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
    check_document_format(document, config_path, FORMAT_NAME, FORMAT_VERSION, "biLM config")
    if "options" not in document:
        raise ConfigError(f"{config_path}: missing field 'options'.")
    return BiLMConfig.from_allennlp_options(document["options"], source=str(config_path))


def load_model_dir(
    path: str | Path, shapes_of: Callable[[BiLMConfig], StateDictShapes]
) -> tuple[BiLMConfig, dict[str, torch.Tensor]]:
    """Read a model directory; every tensor is checked against the shapes `shapes_of(config)` gives
    (`BiLM.state_dict_shapes`: the model passes them, so files never import the model)."""
    config = read_model_config(path)
    weights_path = Path(path) / WEIGHTS_FILE
    if not weights_path.exists():
        raise WeightFileError(f"{path}: {WEIGHTS_FILE} is missing.")
    tensors = _read_tensors(weights_path)
    check_state_dict(tensors, shapes_of(config), str(weights_path))
    return config, tensors


def read_lexicon(path: str | Path) -> Lexicon:
    """The lexicon of a lexicon model's directory (`lexicon.json`)."""
    lexicon_path = Path(path) / LEXICON_FILE
    if not lexicon_path.is_file():
        raise ConfigError(
            f"{path}: {LEXICON_FILE} is missing, and {CONFIG_FILE} says the model reads a character "
            "lexicon. Convert the ELMoForManyLangs model again (spacy-elmo convert MODEL_DIR OUTPUT_DIR)."
        )
    try:
        document = json.loads(lexicon_path.read_text(encoding="utf8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{lexicon_path} is not valid UTF-8 JSON: {error}.") from None
    return Lexicon.from_document(document, str(lexicon_path))


def has_softmax_head(path: Path) -> bool:
    """Whether a model directory holds a softmax head and its vocabulary."""
    return (path / HEAD_FILE).is_file() and (path / VOCAB_FILE).is_file()


def write_softmax_head(path: Path, state_dict: dict[str, torch.Tensor]) -> None:
    """Write the softmax head's weight (V, P) and bias (V,) atomically; the vocabulary is apart."""
    atomic_save_tensors(path / HEAD_FILE, state_dict)


def read_softmax_head(path: Path, vocab_size: int, projection_dim: int) -> dict[str, torch.Tensor]:
    """The softmax head's weight (V, P) and bias (V,), checked against the vocabulary's size."""
    head_path = path / HEAD_FILE
    tensors = _read_tensors(head_path)
    check_state_dict(tensors, softmax_head_state_dict_shapes(vocab_size, projection_dim), str(head_path))
    return tensors


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors; `WeightFileError` if it cannot be read."""
    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as error:
        raise WeightFileError(f"{path} is not a readable safetensors file: {error}.") from None
