"""ELMoForManyLangs (HIT-SCIR) model directories in: config, lexicons, weights. No unpickling.

A model directory holds `config.json` (its `config_path` names the model JSON), `char.dic` and
`word.dic` (`entry<TAB>id` lines) and two torch state dicts, `token_embedder.pkl` and
`encoder.pkl`, read with `torch.load(weights_only=True)`. How its computation maps onto ours:

- characters come from `char.dic` (unknown ones read as `<oov>`), and its tools give each token
  the id of `<eow>` first and that of `<bow>` last: the models were trained that way, so the
  lexicon's word-start row is `<eow>`'s and its word-end row `<bow>`'s;
- the highway gate weights the carried input (AllenNLP's convention): ours weights the
  transform, so the gate's rows and bias change sign (`1 - sigmoid(z) = sigmoid(-z)`);
- the word embedding comes first in the projection's input, `[word; highway]`; ours puts it
  last, so the projection's columns are rotated;
- the LSTM is AllenNLP's cell (gates i, f, g, o, one bias, no forget offset): ours keeps bilm-tf's
  order i, g, f, o and adds 1 to the forget gate at run time, so that block's bias is lowered by 1.

Rows are reordered so that the marker rows come first (see `lexicon.py`): only a permutation.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import torch

from ..config import BiLMConfig
from ..errors import ConfigError, WeightFileError
from ..lexicon import Lexicon
from ..lstm import DIRECTION_NAMES, FORGET_BIAS
from .state_dict import check_state_dict

CONFIG_FILE = "config.json"
CHAR_DICT_FILE = "char.dic"
WORD_DICT_FILE = "word.dic"
TOKEN_EMBEDDER_FILE = "token_embedder.pkl"
ENCODER_FILE = "encoder.pkl"
IDEOGRAPHIC_SPACE = "\u3000"
"""A dictionary line left with one field after stripping is this character's (the reader strips it)."""
CHARACTER_ROLES = ("<pad>", "<eow>", "<bow>", "<bos>", "<eos>", "<oov>")
"""The char.dic entries whose rows become our rows 0..5: padding, word start, word end, sentence
start, sentence end, unknown. Word start is `<eow>`'s row and word end `<bow>`'s, as the models
were trained."""
WORD_ROLES = ("<bos>", "<eos>", "<oov>")
"""The word.dic entries whose rows become our word rows 0..2."""
BOUNDARY_TOKENS = ("<bos>", "<eos>")
_PUBLISHED_MODEL_JSON = {
    "encoder": {
        "name": "elmo",
        "projection_dim": 512,
        "cell_clip": 3,
        "proj_clip": 3,
        "dim": 4096,
        "n_layers": 2,
    },
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
PUBLISHED_MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "cnn_50_100_512_4096_sample.json": _PUBLISHED_MODEL_JSON,
    "cnn_0_100_512_4096_sample.json": _PUBLISHED_MODEL_JSON,  # the package ships the same content
}
"""The model JSON files the `elmoformanylangs` package ships in its `configs/`: its published
models name one of them in `config_path` without holding a copy."""
SOURCE_FILES = (CONFIG_FILE, CHAR_DICT_FILE, TOKEN_EMBEDDER_FILE, ENCODER_FILE)
"""The files that make a directory an ELMoForManyLangs model (word.dic only with a word embedding)."""


def is_elmoformanylangs_dir(path: str | Path) -> bool:
    """Whether `path` is a directory holding an ELMoForManyLangs model's files."""
    path = Path(path)
    return path.is_dir() and all((path / name).is_file() for name in SOURCE_FILES)


def read_elmoformanylangs(model_dir: str | Path) -> tuple[BiLMConfig, dict[str, torch.Tensor], Lexicon]:
    """Our config, state dict (as `BiLM.load_state_dict` takes it) and lexicon of an
    ELMoForManyLangs model directory; every tensor is checked against the model JSON."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        what = "is a file, not a directory" if model_dir.is_file() else "does not exist"
        raise ConfigError(f"ELMoForManyLangs model directory {model_dir} {what}.")
    for name in SOURCE_FILES:
        if not (model_dir / name).is_file():
            raise ConfigError(
                f"{model_dir} is not an ELMoForManyLangs model: {name} is missing (it needs "
                f"{', '.join(SOURCE_FILES)}, and {WORD_DICT_FILE} with a word embedding)."
            )
    model_json, json_source = _model_json(model_dir)
    embedder = _read_tensors(model_dir / TOKEN_EMBEDDER_FILE)
    encoder = _read_tensors(model_dir / ENCODER_FILE)
    settings = _settings(model_json, json_source)
    n_char_rows = _rows_of(embedder, "char_emb_layer.embedding.weight", model_dir / TOKEN_EMBEDDER_FILE)
    characters, char_order = _reordered(
        read_dictionary(model_dir / CHAR_DICT_FILE), CHARACTER_ROLES, n_char_rows, model_dir / CHAR_DICT_FILE
    )
    words = word_order = None
    n_word_rows = 0
    if settings["word_dim"]:
        if not (model_dir / WORD_DICT_FILE).is_file():
            raise ConfigError(
                f"{model_dir}: {WORD_DICT_FILE} is missing, and {json_source} gives a word embedding "
                f"(token_embedder.word_dim {settings['word_dim']})."
            )
        n_word_rows = _rows_of(embedder, "word_emb_layer.embedding.weight", model_dir / TOKEN_EMBEDDER_FILE)
        words, word_order = _reordered(
            read_dictionary(model_dir / WORD_DICT_FILE), WORD_ROLES, n_word_rows, model_dir / WORD_DICT_FILE
        )
    try:
        config = BiLMConfig(
            **settings, n_characters=n_char_rows + 1, char_vocabulary="lexicon", n_words=n_word_rows
        )
    except ConfigError as error:
        raise ConfigError(f"{json_source}: {error}") from None
    for tensors, shapes, file in (
        (embedder, _token_embedder_shapes(config), TOKEN_EMBEDDER_FILE),
        (encoder, _encoder_shapes(config), ENCODER_FILE),
    ):
        check_state_dict(tensors, shapes, str(model_dir / file), described_by="the model JSON")
    state_dict = _token_encoder_state(config, embedder, char_order, word_order) | _lstm_state(config, encoder)
    lexicon = Lexicon(characters, words, BOUNDARY_TOKENS, config.max_characters_per_token)
    return config, state_dict, lexicon


def read_dictionary(path: Path) -> dict[str, int]:
    """A `char.dic` / `word.dic`: `entry<TAB>id` per line, as the package reads it.

    Each line is stripped of surrounding whitespace first, so an entry that is whitespace itself
    leaves one field: that line is the ideographic space U+3000's. A later line for the same entry
    wins. Blank lines are skipped.
    """
    try:
        text = path.read_text(encoding="utf8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path} is not UTF-8 text ({error}).") from None
    entries: dict[str, int] = {}
    for line_number, line in enumerate(text.splitlines(), start=1):
        fields = line.strip().split("\t")
        if fields == [""]:
            continue
        if len(fields) == 1:
            fields.insert(0, IDEOGRAPHIC_SPACE)
        if len(fields) != 2 or not fields[1].isdigit():
            raise ConfigError(
                f"{path}, line {line_number}: expected `entry<TAB>id` with a non-negative integer id, "
                f"found {line!r}."
            )
        entries[fields[0]] = int(fields[1])
    return entries


def _reordered(
    entries: dict[str, int], roles: tuple[str, ...], n_rows: int, source: Path
) -> tuple[dict[str, int], torch.Tensor]:
    """Entries mapped to our rows (roles first, then every other row in its order) and the
    permutation (n_rows,): our row r holds the file's row `order[r]`."""
    for role in roles:
        if role not in entries:
            raise ConfigError(
                f"{source} has no entry {role!r}; every model's dictionary has {', '.join(roles)}."
            )
    role_rows = [entries[role] for role in roles]
    if len(set(role_rows)) != len(roles):
        raise ConfigError(f"{source} gives two of {', '.join(roles)} the same id: {role_rows}.")
    too_high = [entry for entry, row in entries.items() if row >= n_rows]
    if too_high:
        raise ConfigError(
            f"{source}: entry {too_high[0]!r} has id {entries[too_high[0]]}, but the embedding in "
            f"{TOKEN_EMBEDDER_FILE} has {n_rows} rows. The dictionary and the weights do not belong together."
        )
    taken = set(role_rows)
    order = role_rows + [row for row in range(n_rows) if row not in taken]
    our_row = {file_row: row for row, file_row in enumerate(order)}
    return {entry: our_row[row] for entry, row in entries.items()}, torch.tensor(order)


def _model_json(model_dir: Path) -> tuple[dict[str, Any], str]:
    """The model JSON that `config.json`'s `config_path` names: in the directory, under its own
    name in the directory, or one of the package's published files (in that order)."""
    config_path = model_dir / CONFIG_FILE
    outer = _read_json(config_path)
    reference = outer.get("config_path")
    if not isinstance(reference, str) or not reference:
        raise ConfigError(f"{config_path}: field 'config_path' (the model JSON's path) is missing.")
    basename = Path(reference.replace("\\", "/")).name
    for candidate in (model_dir / reference, model_dir / basename):
        if candidate.is_file():
            return _read_json(candidate), str(candidate)
    if basename in PUBLISHED_MODEL_CONFIGS:
        return PUBLISHED_MODEL_CONFIGS[basename], f"the published {basename}"
    raise ConfigError(
        f"{config_path}: config_path {reference!r} names a model JSON that is neither in {model_dir} "
        f"nor one of the published ones ({', '.join(PUBLISHED_MODEL_CONFIGS)}). Copy the model JSON "
        "into the directory and set config_path to its file name."
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not valid UTF-8 JSON: {error}.") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path} holds a JSON {type(document).__name__}, not an object.")
    return document


def _settings(model_json: dict[str, Any], source: str) -> dict[str, Any]:
    """The BiLMConfig fields the model JSON gives (sizes of the lexicons come from the weights)."""
    sections = {}
    for name, kind in (("encoder", "elmo"), ("token_embedder", "cnn")):
        section = model_json.get(name)
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: section {name!r} is missing.")
        if str(section.get("name", "")).lower() != kind:
            raise ConfigError(
                f"{source}: {name}.name is {section.get('name')!r}; only the {kind!r} {name} (the "
                "published models') can be read."
            )
        sections[name] = section
    encoder, embedder = sections["encoder"], sections["token_embedder"]
    keys = {
        "encoder": ("projection_dim", "dim", "n_layers", "cell_clip", "proj_clip"),
        "token_embedder": (
            "activation",
            "filters",
            "n_highway",
            "word_dim",
            "char_dim",
            "max_characters_per_token",
        ),
    }
    for name, section in sections.items():
        for key in keys[name]:
            if key not in section:
                raise ConfigError(f"{source}: field '{name}.{key}' is missing.")
    if not embedder["char_dim"]:
        raise ConfigError(
            f"{source}: token_embedder.char_dim is 0 (no character CNN): such models cannot be read."
        )
    try:
        return {
            "lstm_dim": encoder["dim"],
            "projection_dim": encoder["projection_dim"],
            "n_layers": encoder["n_layers"],
            "cell_clip": float(encoder["cell_clip"])
            if encoder["cell_clip"]
            else None,  # 0: no clip, as theirs
            "proj_clip": float(encoder["proj_clip"]) if encoder["proj_clip"] else None,
            "use_skip_connections": True,
            "char_embedding_dim": embedder["char_dim"],
            "filters": tuple((width, n) for width, n in embedder["filters"]),
            "n_highway": embedder["n_highway"],
            "activation": embedder["activation"],
            "max_characters_per_token": embedder["max_characters_per_token"],
            "word_dim": embedder["word_dim"],
        }
    except (TypeError, ValueError) as error:
        raise ConfigError(
            f"{source}: token_embedder.filters must be [width, n_filters] pairs ({error})."
        ) from None


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """A `torch.save`d state dict, loaded with `weights_only=True`: tensors and plain containers only."""
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise WeightFileError(
            f"{path} holds more than tensors, and is not unpickled here for safety ({error}). "
            "Save the module's state_dict() instead."
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as error:
        raise WeightFileError(f"{path} is not a readable torch state dict: {error}.") from None
    if not isinstance(loaded, dict) or not all(isinstance(value, torch.Tensor) for value in loaded.values()):
        raise WeightFileError(f"{path} does not hold a state dict (a mapping of names to tensors).")
    return {str(name): tensor.float() for name, tensor in loaded.items()}


def _rows_of(tensors: dict[str, torch.Tensor], name: str, source: Path) -> int:
    if name not in tensors or tensors[name].dim() != 2:
        raise WeightFileError(
            f"{source} has no 2-d tensor {name!r}; the file is incomplete or from another model."
        )
    return tensors[name].shape[0]


def _token_embedder_shapes(config: BiLMConfig) -> dict[str, tuple[int, ...]]:
    width = config.n_filters
    shapes: dict[str, tuple[int, ...]] = {
        "char_emb_layer.embedding.weight": (config.char_embedding_rows, config.char_embedding_dim),
        "projection.weight": (config.projection_dim, config.token_features),
        "projection.bias": (config.projection_dim,),
    }
    if config.word_dim:
        shapes["word_emb_layer.embedding.weight"] = (config.n_words, config.word_dim)
    for index, (kernel_width, n_filters) in enumerate(config.filters):
        shapes[f"convolutions.{index}.weight"] = (n_filters, config.char_embedding_dim, kernel_width)
        shapes[f"convolutions.{index}.bias"] = (n_filters,)
    for index in range(config.n_highway):
        shapes[f"highways._layers.{index}.weight"] = (2 * width, width)
        shapes[f"highways._layers.{index}.bias"] = (2 * width,)
    return shapes


def _encoder_shapes(config: BiLMConfig) -> dict[str, tuple[int, ...]]:
    gates, projection = 4 * config.lstm_dim, config.projection_dim
    shapes: dict[str, tuple[int, ...]] = {}
    for layer in range(config.n_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            shapes[f"{prefix}.input_linearity.weight"] = (gates, projection)
            shapes[f"{prefix}.state_linearity.weight"] = (gates, projection)
            shapes[f"{prefix}.state_linearity.bias"] = (gates,)
            shapes[f"{prefix}.state_projection.weight"] = (projection, config.lstm_dim)
    return shapes


def _token_encoder_state(
    config: BiLMConfig,
    embedder: dict[str, torch.Tensor],
    char_order: torch.Tensor,
    word_order: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """Our `token_encoder.*` tensors: rows permuted, highway gates negated, projection rotated."""
    width = config.n_filters
    state = {"token_encoder.char_embedding": embedder["char_emb_layer.embedding.weight"][char_order]}
    if word_order is not None:
        state["token_encoder.word_embedding"] = embedder["word_emb_layer.embedding.weight"][word_order]
    for index in range(len(config.filters)):
        for kind in ("weight", "bias"):
            state[f"token_encoder.convolutions.{index}.{kind}"] = embedder[f"convolutions.{index}.{kind}"]
    gate_sign = torch.cat([torch.ones(width), -torch.ones(width)])  # transform rows kept, gate rows negated
    for index in range(config.n_highway):
        for kind in ("weight", "bias"):
            tensor = embedder[f"highways._layers.{index}.{kind}"]
            sign = gate_sign if kind == "bias" else gate_sign.unsqueeze(1)
            state[f"token_encoder.highways.{index}.linear.{kind}"] = tensor * sign
    projection = embedder["projection.weight"]  # (P, W + F), the word columns first
    state["token_encoder.projection.weight"] = torch.cat(
        [projection[:, config.word_dim :], projection[:, : config.word_dim]], dim=1
    )
    state["token_encoder.projection.bias"] = embedder["projection.bias"]
    return {name: tensor.contiguous() for name, tensor in state.items()}


def _lstm_state(config: BiLMConfig, encoder: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our per-direction LSTM tensors: gate blocks i, f, g, o -> i, g, f, o; forget bias - 1."""
    cell = config.lstm_dim
    gate_order = torch.cat([torch.arange(cell) + block * cell for block in (0, 2, 1, 3)])
    forget_offset = torch.zeros(4 * cell)
    forget_offset[2 * cell : 3 * cell] = FORGET_BIAS  # ours adds it back at run time
    state = {}
    for direction, stack in zip(("forward", "backward"), DIRECTION_NAMES):
        for layer in range(config.n_layers):
            source, target = f"{direction}_layer_{layer}", f"{stack}.layers.{layer}"
            state[f"{target}.input_weight"] = encoder[f"{source}.input_linearity.weight"][gate_order].T
            state[f"{target}.recurrent_weight"] = encoder[f"{source}.state_linearity.weight"][gate_order].T
            state[f"{target}.bias"] = encoder[f"{source}.state_linearity.bias"][gate_order] - forget_offset
            state[f"{target}.projection_weight"] = encoder[f"{source}.state_projection.weight"].T
    return {name: tensor.contiguous() for name, tensor in state.items()}
