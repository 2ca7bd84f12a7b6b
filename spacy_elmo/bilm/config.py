"""`BiLMConfig`: every hyperparameter of the biLM, read from and written to AllenNLP `options.json`."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"  # the first 8 bytes of every HDF5 file

# Top-level keys bilm-tf writes into the options.json of a training run. They describe how the
# biLM was trained, not its shape: we keep them so that an options file round-trips unchanged.
TRAINING_OPTION_KEYS = frozenset(
    {
        "bidirectional",
        "dropout",
        "all_clip_norm_val",
        "n_epochs",
        "n_train_tokens",
        "batch_size",
        "n_tokens_vocab",
        "unroll_steps",
        "n_negative_samples_batch",
    }
)
_LSTM_KEYS = ("dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections")
_CHAR_CNN_KEYS = (
    "embedding",
    "filters",
    "n_highway",
    "activation",
    "max_characters_per_token",
    "n_characters",
)
_WORD_EMBEDDING_KEYS = ("dim", "n_words")
ACTIVATIONS = ("relu", "tanh")
CHAR_VOCABULARIES = ("bytes", "lexicon")
"""How text becomes char ids: AllenNLP's UTF-8 bytes, or a model's own character lexicon
(`lexicon.py`: ELMoForManyLangs)."""
BYTE_CHAR_IDS = 262  # 0 = padding, 1..256 bytes, 257..261 BOS, EOS, BOW, EOW, PAD (shifted)
PUBLISHED_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclass(frozen=True)
class BiLMConfig:
    """The shape and numerics of an ELMo biLM.

    Field names follow AllenNLP's `options.json` (`lstm.dim` is `lstm_dim`, `char_cnn.embedding.dim`
    is `char_embedding_dim`). `cell_clip`/`proj_clip` of `None` mean "no clipping".

    `char_vocabulary` "lexicon" (ELMoForManyLangs) reads char ids from the model's own lexicon:
    `n_characters` is then its number of ids, 0 (no token) included. `word_dim` > 0 adds a word
    embedding of `n_words` rows (lexicon models only), concatenated to the highway output before
    the projection (`F + word_dim -> P`). Neither appears in the options of a byte model.
    """

    lstm_dim: int
    projection_dim: int
    n_layers: int = 2
    cell_clip: float | None = 3.0
    proj_clip: float | None = 3.0
    use_skip_connections: bool = True
    char_embedding_dim: int = 16
    filters: tuple[tuple[int, int], ...] = PUBLISHED_FILTERS
    n_highway: int = 1
    activation: str = "relu"
    max_characters_per_token: int = 50
    n_characters: int = 262
    char_vocabulary: str = "bytes"
    word_dim: int = 0
    n_words: int = 0
    training_options: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        for name in ("lstm_dim", "projection_dim", "n_layers", "char_embedding_dim"):
            _require_positive_int(name, getattr(self, name))
        _require_non_negative_int("n_highway", self.n_highway)
        if not self.filters:
            raise ConfigError("char_cnn.filters is empty: give at least one [width, n_filters] pair.")
        for width, n_filters in self.filters:
            if width < 1 or n_filters < 1:
                raise ConfigError(
                    f"char_cnn.filters has the pair [{width}, {n_filters}]: width and number of "
                    "filters must both be at least 1."
                )
        if self.activation not in ACTIVATIONS:
            raise ConfigError(
                f"char_cnn.activation is {self.activation!r}: use one of {', '.join(ACTIVATIONS)}."
            )
        max_width = max(width for width, _ in self.filters)
        if self.max_characters_per_token < max(3, max_width):
            raise ConfigError(
                f"char_cnn.max_characters_per_token is {self.max_characters_per_token}: it must be "
                f"at least 3 and at least the widest filter ({max_width})."
            )
        self._check_vocabularies()
        for name in ("cell_clip", "proj_clip"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"lstm.{name} is {value}: use a positive number, or null.")

    def _check_vocabularies(self) -> None:
        if self.char_vocabulary not in CHAR_VOCABULARIES:
            raise ConfigError(
                f"char_cnn.vocabulary is {self.char_vocabulary!r}: use one of {', '.join(CHAR_VOCABULARIES)}."
            )
        if self.char_vocabulary == "bytes" and self.n_characters not in (261, 262):
            raise ConfigError(
                f"char_cnn.n_characters is {self.n_characters}: ELMo uses 261 (training) or 262 "
                "(prediction, with the padding row); set it to 262."
            )
        if self.char_vocabulary == "lexicon" and (
            not isinstance(self.n_characters, int)
            or isinstance(self.n_characters, bool)
            or self.n_characters < 2
        ):
            raise ConfigError(
                f"char_cnn.n_characters is {self.n_characters!r}: a lexicon model needs an integer of "
                "at least 2 (its lexicon's characters plus the id 0 of no token)."
            )
        _require_non_negative_int("word_embedding.dim", self.word_dim)
        _require_non_negative_int("word_embedding.n_words", self.n_words)
        if (self.word_dim > 0) != (self.n_words > 0):
            raise ConfigError(
                f"word_embedding has dim {self.word_dim} and n_words {self.n_words}: give both "
                "(a word embedding) or neither."
            )
        if self.word_dim and self.char_vocabulary != "lexicon":
            raise ConfigError(
                "word_embedding needs char_cnn.vocabulary 'lexicon': the word ids come from the "
                "model's lexicon, and byte models have none."
            )

    @property
    def uses_lexicon(self) -> bool:
        """Whether char (and word) ids come from the model's own lexicon, not from UTF-8 bytes."""
        return self.char_vocabulary == "lexicon"

    @property
    def n_char_ids(self) -> int:
        """How many distinct char ids the biLM reads (0 = no token included): 262 for bytes."""
        return self.n_characters if self.uses_lexicon else BYTE_CHAR_IDS

    @property
    def char_embedding_rows(self) -> int:
        """Rows of the learned char embedding: one per id except 0 (261 for bytes)."""
        return self.n_char_ids - 1

    @property
    def token_features(self) -> int:
        """Width of the projection's input: the highway output, plus the word embedding if any."""
        return self.n_filters + self.word_dim

    @property
    def n_filters(self) -> int:
        """Total number of char CNN filters (F): the width of the highway layers."""
        return sum(n_filters for _, n_filters in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of every output layer: `2 * projection_dim` (forward and backward)."""
        return 2 * self.projection_dim

    @property
    def n_output_layers(self) -> int:
        """Number of output layers: the token layer plus one per LSTM layer (L + 1)."""
        return self.n_layers + 1

    def replace(self, **changes: Any) -> BiLMConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- AllenNLP options.json -------------------------------------------------------------

    def to_allennlp_options(self) -> dict[str, Any]:
        """The AllenNLP/bilm-tf `options.json` content for this configuration."""
        return {
            "lstm": {
                "dim": self.lstm_dim,
                "projection_dim": self.projection_dim,
                "n_layers": self.n_layers,
                "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip,
                "use_skip_connections": self.use_skip_connections,
            },
            "char_cnn": {
                "embedding": {"dim": self.char_embedding_dim},
                "filters": [[width, n_filters] for width, n_filters in self.filters],
                "n_highway": self.n_highway,
                "activation": self.activation,
                "max_characters_per_token": self.max_characters_per_token,
                "n_characters": self.n_characters,
                **({"vocabulary": self.char_vocabulary} if self.uses_lexicon else {}),
            },
            **({"word_embedding": {"dim": self.word_dim, "n_words": self.n_words}} if self.word_dim else {}),
            **self.training_options,
        }

    @classmethod
    def from_allennlp_options(cls, options: dict[str, Any], source: str = "options") -> BiLMConfig:
        """Read an AllenNLP/bilm-tf options dict; unknown or missing fields raise `ConfigError`."""
        if not isinstance(options, dict):
            raise ConfigError(f"{source}: expected a JSON object, found {type(options).__name__}.")
        unknown = sorted(set(options) - {"lstm", "char_cnn", "word_embedding"} - TRAINING_OPTION_KEYS)
        if unknown:
            raise ConfigError(
                f"{source}: unknown field {unknown[0]!r}. Known top-level fields are 'lstm', "
                "'char_cnn', 'word_embedding' and bilm-tf's training fields "
                f"({', '.join(sorted(TRAINING_OPTION_KEYS))})."
            )
        lstm = _section(options, "lstm", _LSTM_KEYS, source)
        char_cnn = _section(options, "char_cnn", _CHAR_CNN_KEYS, source, optional=("vocabulary",))
        word_embedding = (
            _section(options, "word_embedding", _WORD_EMBEDDING_KEYS, source)
            if "word_embedding" in options
            else {"dim": 0, "n_words": 0}
        )
        embedding = _section(char_cnn, "embedding", ("dim",), f"{source}: char_cnn")
        filters = char_cnn["filters"]
        if not isinstance(filters, list) or not all(
            isinstance(pair, list | tuple) and len(pair) == 2 for pair in filters
        ):
            raise ConfigError(
                f"{source}: char_cnn.filters must be a list of [width, n_filters] pairs, found {filters!r}."
            )
        try:
            return cls(
                lstm_dim=lstm["dim"],
                projection_dim=lstm["projection_dim"],
                n_layers=lstm["n_layers"],
                cell_clip=_optional_float(lstm["cell_clip"]),
                proj_clip=_optional_float(lstm["proj_clip"]),
                use_skip_connections=bool(lstm["use_skip_connections"]),
                char_embedding_dim=embedding["dim"],
                filters=tuple((w, n) for w, n in filters),
                n_highway=char_cnn["n_highway"],
                activation=char_cnn["activation"],
                max_characters_per_token=char_cnn["max_characters_per_token"],
                n_characters=char_cnn["n_characters"],
                char_vocabulary=char_cnn.get("vocabulary", "bytes"),
                word_dim=word_embedding["dim"],
                n_words=word_embedding["n_words"],
                training_options={k: options[k] for k in options if k in TRAINING_OPTION_KEYS},
            )
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None

    @classmethod
    def from_options_file(cls, path: str | Path) -> BiLMConfig:
        """Read an AllenNLP `options.json` file."""
        path = Path(path)
        if not path.is_file():
            what = "is a directory, not a file" if path.is_dir() else "does not exist"
            raise ConfigError(f"Options file {path} {what}.")
        data = path.read_bytes()
        if data.startswith(HDF5_SIGNATURE):
            raise ConfigError(
                f"Options file {path} is an HDF5 weight file. Give the options JSON first and the "
                "weights second: OPTIONS.json WEIGHTS.hdf5."
            )
        try:
            options = json.loads(data.decode("utf8"))
        except UnicodeDecodeError:
            raise ConfigError(
                f"Options file {path} is not UTF-8 text: give the AllenNLP options JSON."
            ) from None
        except json.JSONDecodeError as error:
            raise ConfigError(f"Options file {path} is not valid JSON: {error}.") from None
        if not isinstance(options, dict):
            raise ConfigError(f"Options file {path} holds a JSON {type(options).__name__}, not an object.")
        return cls.from_allennlp_options(options, source=str(path))

    def to_options_file(self, path: str | Path) -> None:
        """Write this configuration as an AllenNLP `options.json` file (atomically)."""
        from .io.atomic import atomic_write_text

        atomic_write_text(Path(path), json.dumps(self.to_allennlp_options(), indent=2) + "\n")

    @classmethod
    def preset(cls, name: str) -> BiLMConfig:
        """One of the published configurations: see `PRESETS`."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ConfigError(f"Unknown biLM preset {name!r}: use one of {', '.join(PRESETS)}.") from None


def _section(
    parent: dict[str, Any], name: str, keys: tuple[str, ...], source: str, optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    if name not in parent:
        raise ConfigError(f"{source}: missing field {name!r}.")
    section = parent[name]
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: field {name!r} must be an object, found {section!r}.")
    for key in keys:
        if key not in section:
            raise ConfigError(f"{source}: missing field '{name}.{key}'.")
    unknown = sorted(set(section) - set(keys) - set(optional))
    if unknown:
        raise ConfigError(
            f"{source}: unknown field '{name}.{unknown[0]}'. Known fields of '{name}': "
            f"{', '.join(keys + optional)}."
        )
    return section


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _require_positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} is {value!r}: it must be a positive integer.")


def _require_non_negative_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{name} is {value!r}: it must be a non-negative integer.")


PRESETS: dict[str, BiLMConfig] = {
    # AllenNLP's published models: file stems elmo_2x1024_128_2048cnn_1xhighway, ...
    "small": BiLMConfig(lstm_dim=1024, projection_dim=128, n_highway=1),
    "medium": BiLMConfig(lstm_dim=2048, projection_dim=256, n_highway=1),
    "original": BiLMConfig(lstm_dim=4096, projection_dim=512, n_highway=2),
    "original-5.5b": BiLMConfig(lstm_dim=4096, projection_dim=512, n_highway=2),
}
