"""Random-weight ELMoForManyLangs model directories, built with the `elmoformanylangs` package's
own classes and saved as its `Embedder` loads them (the oracle of test_elmoformanylangs.py)."""

from __future__ import annotations

import copy
import json
from contextlib import AbstractContextManager
from pathlib import Path
from unittest import mock

import pytest
import torch

TINY_MODEL_JSON = {
    "encoder": {
        "name": "elmo",
        "projection_dim": 8,
        "cell_clip": 1.5,
        "proj_clip": 0.6,
        "dim": 24,
        "n_layers": 2,
    },
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 4], [2, 8], [3, 12]],
        "n_highway": 2,
        "word_dim": 5,
        "char_dim": 4,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 16},
    "dropout": 0.1,
}
CHARACTERS = list("abcdefghijklmnopqrstuvwxyzäöüßABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?'-0123456789") + [
    "天",
    "気",
    "\u3000",  # written as a line with the id alone, as the published files hold it
]
WORDS = [
    "the",
    "bank",
    "raised",
    "rates",
    "Die",
    "Bank",
    "hat",
    "die",
    "Zinsen",
    "erhöht",
    ".",
    "天気",
    "ñu",
    "çu",
]
"""`ñu` and `çu` share a char row (ñ and ç are outside the lexicon) but not a word."""
MODEL_JSON_NAME = "tiny_model.json"


def efml_oracle():
    """The `elmoformanylangs` package (the test extra), skipping the test where it is missing."""
    return pytest.importorskip("elmoformanylangs")


def without_orthogonal_init() -> AbstractContextManager:
    """The package's LSTM cells fill their weights with QR-orthogonalised blocks, seconds at the
    published shape: skipped where every weight is overwritten afterwards."""
    return mock.patch("elmoformanylangs.modules.lstm_cell_with_projection.block_orthogonal")


def write_dictionary(path: Path, entries: list[str]) -> dict[str, int]:
    """`entry<TAB>id` lines in the order given; U+3000 as a line holding only its id."""
    lines = [f"{index}" if entry == "\u3000" else f"{entry}\t{index}" for index, entry in enumerate(entries)]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return {entry: index for index, entry in enumerate(entries)}


def write_random_efml(
    directory: Path,
    *,
    word_dim: int = 5,
    model_json: dict | None = None,
    seed: int = 0,
    config_path: str = MODEL_JSON_NAME,
) -> Path:
    """Write a random ELMoForManyLangs model: config.json, the model JSON, char.dic, word.dic (with
    a word embedding), token_embedder.pkl and encoder.pkl. The char.dic lists characters first and
    the markers last, as the published ones do; word.dic starts `<oov> <bos> <eos> <pad>`."""
    efml_oracle()
    from elmoformanylangs.frontend import Model
    from elmoformanylangs.modules.embedding_layer import EmbeddingLayer

    model_json = copy.deepcopy(model_json or TINY_MODEL_JSON)
    model_json["token_embedder"]["word_dim"] = word_dim
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MODEL_JSON_NAME).write_text(json.dumps(model_json), encoding="utf8")
    (directory / "config.json").write_text(
        json.dumps({"config_path": config_path, "seed": seed}), encoding="utf8"
    )
    char_lexicon = write_dictionary(
        directory / "char.dic", CHARACTERS + ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]
    )
    torch.manual_seed(seed)
    char_layer = EmbeddingLayer(model_json["token_embedder"]["char_dim"], char_lexicon, fix_emb=False)
    word_layer = None
    if word_dim:
        word_lexicon = write_dictionary(directory / "word.dic", ["<oov>", "<bos>", "<eos>", "<pad>"] + WORDS)
        word_layer = EmbeddingLayer(word_dim, word_lexicon, fix_emb=False)
    with without_orthogonal_init():  # every weight is drawn below
        model = Model(model_json, word_layer, char_layer, use_cuda=False)
    with torch.no_grad():  # every gate, clip and highway branch matters; layer 0 stays within ~5
        for name, parameter in model.named_parameters():
            parameter.normal_(0.0, _weight_std(name, parameter))
    torch.save(model.token_embedder.state_dict(), directory / "token_embedder.pkl")
    torch.save(model.encoder.state_dict(), directory / "encoder.pkl")
    return directory


def _weight_std(name: str, parameter: torch.Tensor) -> float:
    """Embeddings N(0, 1); every other weight scaled by its fan-in, so that the published shape
    keeps the same magnitudes as the tiny one (layer 0 within ~5, gates neither flat nor
    saturated, clips reached)."""
    if "emb_layer" in name:
        return 1.0
    if parameter.dim() == 1:  # biases
        return 0.1 if "projection" in name else 0.5
    fan_in = parameter[0].numel()
    gain = 0.3 if name.startswith("token_embedder.projection") else 1.0 if "highways" in name else 1.4
    return gain / fan_in**0.5


def efml_layers(model_dir: Path, sentences: list[list[str]]) -> list:
    """Every layer (3, n_tokens, 2P) of each sentence as the package computes it: one batch, from
    zero states (its encoder is stateful)."""
    elmoformanylangs = efml_oracle()
    with without_orthogonal_init():  # every weight is then read by a strict `load_state_dict`
        embedder = elmoformanylangs.Embedder(str(model_dir), batch_size=max(len(sentences), 1))
    embedder.model.encoder.reset_states()
    with torch.no_grad():
        return embedder.sents2elmo(sentences, output_layer=-2)
