"""Pretraining configs: confection files with `[paths]`, `[model]`, `[corpus]` and `[training]`.

Every key has a default (`DEFAULTS`); a config file only names what it changes. Unknown sections
or keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confection import Config, ConfigValidationError

from ..bilm.config import BiLMConfig
from ..bilm.errors import ConfigError
from .errors import TrainingConfigError

MODEL_FIELDS = tuple(
    field.name for field in dataclasses.fields(BiLMConfig) if field.name != "training_options"
)

DEFAULTS: dict[str, dict[str, Any]] = {
    "paths": {"train": None, "dev": None},
    "model": {"preset": None, **{name: None for name in MODEL_FIELDS}},
    "corpus": {
        "lang": "en",
        "document_per": "line",
        "dev_documents": 0,
        "max_dev_tokens": 100_000,
        "max_train_eval_tokens": 10_000,
        "vocab_size": 50_000,
        "min_count": 1,
        "skip_undecodable": False,
    },
    "training": {
        "seed": 0,
        "batch_size": 64,
        "unroll_steps": 20,
        "optimizer": "adagrad",
        "learning_rate": 0.2,
        "lr_schedule": "constant",
        "warmup_steps": 0,
        "decay_steps": 0,
        "final_learning_rate": 0.0,
        "initial_accumulator_value": 1.0,
        "grad_clip": 10.0,
        "dropout": 0.1,
        "state_reset_probability": 0.0,
        "softmax": "sampled",
        "n_negative_samples": 8192,
        "max_steps": 0,
        "max_epochs": 0,
        "max_minutes": 0.0,
        "checkpoint_every": 1000,
        "checkpoint_minutes": 0.0,
        "eval_every": 1000,
        "eval_batch_size": 64,
        "log_every": 10,
        "threads": 0,
    },
}
CHOICES = {
    ("corpus", "document_per"): ("line", "file"),
    ("training", "optimizer"): ("adagrad", "adam", "sgd"),
    ("training", "softmax"): ("sampled", "full"),
    ("training", "lr_schedule"): ("constant", "linear", "cosine"),
}


@dataclass(frozen=True)
class CorpusSettings:
    """`[corpus]` plus the `[paths]` it reads."""

    train: str | None
    dev: str | None
    lang: str
    document_per: str
    dev_documents: int
    max_dev_tokens: int
    max_train_eval_tokens: int  # training perplexity is measured on this many tokens of the training text
    vocab_size: int
    min_count: int
    skip_undecodable: bool


@dataclass(frozen=True)
class TrainingSettings:
    """`[training]`: 0 for a limit (`max_steps`, `max_epochs`, `max_minutes`) or an interval means "none"."""

    seed: int
    batch_size: int
    unroll_steps: int
    optimizer: str
    learning_rate: float  # the peak rate of a schedule (schedule.py)
    lr_schedule: str  # after the warm-up: constant, or linear / cosine decay to final_learning_rate
    warmup_steps: int
    decay_steps: int  # where the decay ends; 0 = max_steps
    final_learning_rate: float
    initial_accumulator_value: float
    grad_clip: float
    dropout: float
    state_reset_probability: float  # chance that a row starts a batch from zero LSTM states
    softmax: str
    n_negative_samples: int
    max_steps: int
    max_epochs: int
    max_minutes: float
    checkpoint_every: int
    checkpoint_minutes: float
    eval_every: int
    eval_batch_size: int
    log_every: int
    threads: int

    @property
    def decay_horizon(self) -> int:
        """The step at which a decaying schedule reaches `final_learning_rate`."""
        return self.decay_steps or self.max_steps


@dataclass(frozen=True)
class PretrainConfig:
    """A validated pretraining config; `text` is the resolved config, written next to the model."""

    model: BiLMConfig
    corpus: CorpusSettings
    training: TrainingSettings
    text: str


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """`["--training.max_steps", "100", "--paths.train=x"]` -> {"training.max_steps": 100, ...}.

    Values are read as JSON where they parse (numbers, booleans, null, lists), else as strings,
    as spaCy's CLI does.
    """
    overrides: dict[str, Any] = {}
    position = 0
    while position < len(args):
        option = args[position]
        if not option.startswith("--") or "." not in option:
            raise TrainingConfigError(
                f"Unexpected argument {option!r}: config overrides look like --section.key value."
            )
        key, has_value, value = option[2:].partition("=")
        if not has_value:
            if position + 1 >= len(args) or args[position + 1].startswith("--"):
                raise TrainingConfigError(f"Override {option} has no value: write {option} VALUE.")
            position += 1
            value = args[position]
        overrides[key.replace("-", "_")] = _json_or_string(value)
        position += 1
    return overrides


def _json_or_string(value: str) -> Any:
    import json

    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def load_pretrain_config(path: str | Path, overrides: dict[str, Any] | None = None) -> PretrainConfig:
    """Read, override, interpolate and validate a pretraining config file."""
    path = Path(path)
    if not path.is_file():
        raise TrainingConfigError(f"Config file {path} does not exist.")
    overrides = overrides or {}
    for key in overrides:
        section, _, name = key.partition(".")
        if section not in DEFAULTS or name not in DEFAULTS[section]:
            raise TrainingConfigError(_unknown_key_message(f"override --{key}", section, name))
    try:
        raw = Config().from_disk(path, interpolate=False)
        for section, keys in raw.items():
            for name in keys:
                if section not in DEFAULTS or name not in DEFAULTS[section]:
                    raise TrainingConfigError(_unknown_key_message(str(path), section, name))
        full = Config({section: dict(keys) for section, keys in DEFAULTS.items()}).merge(raw)
        resolved = Config(full).merge(_nested(overrides)).interpolate()
    except ConfigValidationError as error:
        raise TrainingConfigError(f"{path}: {error}") from None
    return PretrainConfig(
        model=_model_config(resolved["model"], str(path)),
        corpus=_settings(CorpusSettings, {**resolved["corpus"], **resolved["paths"]}, "corpus", str(path)),
        training=_schedule_checked(
            _settings(TrainingSettings, resolved["training"], "training", str(path)), str(path)
        ),
        text=resolved.to_str(),
    )


def _nested(overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    nested: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        section, _, name = key.partition(".")
        nested.setdefault(section, {})[name] = value
    return nested


def _unknown_key_message(source: str, section: str, name: str) -> str:
    if section not in DEFAULTS:
        return f"{source}: unknown section [{section}]. Known sections: {', '.join(DEFAULTS)}."
    return (
        f"{source}: unknown key {name!r} in [{section}]. Known keys of [{section}]: "
        f"{', '.join(DEFAULTS[section])}."
    )


def _model_config(section: dict[str, Any], source: str) -> BiLMConfig:
    fields = {name: value for name, value in section.items() if name != "preset" and value is not None}
    try:
        if section["preset"] is not None:
            return BiLMConfig.preset(section["preset"]).replace(**fields)
        missing = [name for name in ("lstm_dim", "projection_dim") if name not in fields]
        if missing:
            raise TrainingConfigError(
                f"{source}: [model] needs a preset (small, medium, original) or at least "
                f"{' and '.join(missing)}."
            )
        return BiLMConfig(**fields)
    except (ConfigError, TypeError) as error:
        raise TrainingConfigError(f"{source}: [model] is invalid: {error}") from None


def _schedule_checked(settings: TrainingSettings, source: str) -> TrainingSettings:
    """A decaying schedule needs a step to end at; a floor above the peak is a typo."""
    horizon = settings.decay_horizon
    if settings.lr_schedule != "constant" and horizon == 0:
        raise TrainingConfigError(
            f"{source}: [training] lr_schedule = {settings.lr_schedule!r} decays over steps, but "
            "neither decay_steps nor max_steps is set: set decay_steps (a run stopped by max_minutes "
            "does not know its last step in advance)."
        )
    if settings.lr_schedule != "constant" and horizon <= settings.warmup_steps:
        raise TrainingConfigError(
            f"{source}: [training] the decay ends at step {horizon}, not after the "
            f"{settings.warmup_steps} warm-up steps: raise decay_steps (or max_steps)."
        )
    if settings.final_learning_rate > settings.learning_rate:
        raise TrainingConfigError(
            f"{source}: [training] final_learning_rate {settings.final_learning_rate} is above "
            f"learning_rate {settings.learning_rate}: a decay ends below where it starts."
        )
    return settings


def _settings(kind: type, values: dict[str, Any], section: str, source: str) -> Any:
    for (choice_section, name), allowed in CHOICES.items():
        if choice_section == section and values[name] not in allowed:
            raise TrainingConfigError(
                f"{source}: [{section}] {name} is {values[name]!r}; use one of {', '.join(allowed)}."
            )
    for field in dataclasses.fields(kind):
        value = values[field.name]
        if field.type in ("int", "float") and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TrainingConfigError(
                f"{source}: [{section}] {field.name} is {value!r}; it must be a number."
            )
        if field.type in ("int", "float") and value < 0:
            raise TrainingConfigError(f"{source}: [{section}] {field.name} is {value!r}; it must be >= 0.")
    settings = kind(**{field.name: values[field.name] for field in dataclasses.fields(kind)})
    positive = {"batch_size", "unroll_steps", "learning_rate", "eval_batch_size", "vocab_size", "min_count"}
    for name in positive & {field.name for field in dataclasses.fields(kind)}:
        if not getattr(settings, name) > 0:
            raise TrainingConfigError(f"{source}: [{section}] {name} must be positive.")
    for name in {"dropout", "state_reset_probability"} & {field.name for field in dataclasses.fields(kind)}:
        if getattr(settings, name) > 1:
            raise TrainingConfigError(
                f"{source}: [{section}] {name} is {getattr(settings, name)!r}; a probability must be <= 1."
            )
    return settings
