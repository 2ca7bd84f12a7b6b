"""Pretraining configs: confection files with `[paths]`, `[model]`, `[corpus]` and `[training]`.

The keys and their defaults are `default_pretrain.cfg`; their types and limits are the pydantic
schemas here (as spaCy validates `[training]` with `ConfigSchemaTraining`). A config file names
only what it changes; an unknown section or key is an error, so a typo never silently falls back
to a default. Command-line overrides are parsed by spaCy's own parser.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from confection import Config, ConfigValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..bilm.config import BiLMConfig
from ..bilm.errors import ConfigError
from ..configs import shipped_config
from .errors import TrainingConfigError

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_pretrain.cfg")

Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(gt=0)]
Amount = Annotated[float, Field(ge=0)]
Probability = Annotated[float, Field(ge=0, le=1)]


class Section(BaseModel):
    """A config section: every key typed, no key unknown, values as written (no coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PathsSection(Section):
    train: str | None
    dev: str | None


class CorpusSection(Section):
    lang: str
    document_per: Literal["line", "file"]
    dev_documents: Count
    max_dev_tokens: Count
    max_train_eval_tokens: Count  # training perplexity is measured on this many tokens of the training text
    vocab_size: Positive
    min_count: Positive
    skip_undecodable: bool


class CorpusSettings(CorpusSection):
    """`[corpus]` plus the `[paths]` it reads."""

    train: str | None
    dev: str | None


class TrainingSettings(Section):
    """`[training]`: 0 for a limit (`max_steps`, `max_epochs`, `max_minutes`) or an interval means "none";
    at least one of the three limits must be set."""

    seed: Count
    batch_size: Positive
    unroll_steps: Positive
    optimizer: Literal["adagrad", "adam", "sgd"]
    learning_rate: Annotated[float, Field(gt=0)]  # the peak rate of a schedule (schedule.py)
    lr_schedule: Literal["constant", "linear", "cosine"]  # after the warm-up: decay to final_learning_rate
    warmup_steps: Count
    decay_steps: Count  # where the decay ends; 0 = max_steps
    final_learning_rate: Amount
    initial_accumulator_value: Amount
    grad_clip: Amount
    dropout: Probability
    state_reset_probability: Probability  # chance that a row starts a batch from zero LSTM states
    softmax: Literal["sampled", "full"]
    n_negative_samples: Count
    max_steps: Count
    max_epochs: Count
    max_minutes: Amount
    checkpoint_every: Count
    checkpoint_minutes: Amount
    eval_every: Count
    eval_batch_size: Positive
    log_every: Positive
    threads: Count
    precision: Literal["fp32", "bf16"]  # bf16: matrix products under autocast; weights stay float32

    @property
    def decay_horizon(self) -> int:
        """The step at which a decaying schedule reaches `final_learning_rate`."""
        return self.decay_steps or self.max_steps


# [model]: a preset and/or any BiLMConfig field; BiLMConfig checks the values themselves. Pretraining
# reads UTF-8 bytes, so the lexicon and word-embedding fields (ELMoForManyLangs models) are not here.
NOT_PRETRAINED_FIELDS = ("training_options", "char_vocabulary", "word_dim", "n_words")
ModelSection = create_model(
    "ModelSection",
    __base__=Section,
    preset=(str | None, ...),
    **{
        field.name: (Any, ...)
        for field in dataclasses.fields(BiLMConfig)
        if field.name not in NOT_PRETRAINED_FIELDS
    },
)


class PretrainSchema(Section):
    paths: PathsSection
    model: ModelSection  # type: ignore[valid-type]
    corpus: CorpusSection
    training: TrainingSettings


@dataclass(frozen=True)
class PretrainConfig:
    """A validated pretraining config; `text` is the resolved config, written next to the model."""

    model: BiLMConfig
    corpus: CorpusSettings
    training: TrainingSettings
    text: str


def default_config() -> Config:
    """`default_pretrain.cfg`: every key and its default."""
    return Config().from_disk(DEFAULT_CONFIG_PATH, interpolate=False)


def load_pretrain_config(path: str | Path, overrides: dict[str, Any] | None = None) -> PretrainConfig:
    """Read, override, interpolate and validate a pretraining config file.

    path: a config file, or the name of a shipped one (`pretrain_cpu.cfg`, `pretrain_small.cfg`,
        `pretrain_tiny.cfg`) where no file of that name is in the working directory.
    overrides: `{"training.max_steps": 100}`, as the CLI's `--section.key value` arguments give them.
    """
    path = Path(path)
    if not path.exists() and path.parent == Path(".") and shipped_config(path.name).is_file():
        path = shipped_config(path.name)  # a shipped config by its name, e.g. pretrain_cpu.cfg
    if not path.is_file():
        raise TrainingConfigError(f"Config file {path} does not exist.")
    defaults = default_config()
    for key in overrides or {}:
        section, _, name = key.partition(".")
        if section not in defaults or name not in defaults[section]:
            raise TrainingConfigError(_unknown_key_message(f"override --{key}", section, name, defaults))
    try:
        merged = defaults.merge(Config().from_disk(path, interpolate=False))
        resolved = merged.merge(_nested(overrides or {})).interpolate()
    except ConfigValidationError as error:
        problem = (error.desc or error.title or "").split("\n\n")[-1]  # confection's own, without its advice
        raise TrainingConfigError(f"{path} is not a valid config: {' '.join(problem.split())}") from None
    try:
        schema = PretrainSchema.model_validate(dict(resolved))
    except ValidationError as error:
        raise TrainingConfigError(_validation_message(error, str(path), defaults)) from None
    return PretrainConfig(
        model=_model_config(schema.model.model_dump(), str(path)),
        corpus=CorpusSettings(**schema.corpus.model_dump(), **schema.paths.model_dump()),
        training=_schedule_checked(schema.training, str(path)),
        text=resolved.to_str(),
    )


def _nested(overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    nested: dict[str, dict[str, Any]] = {}
    for key, value in overrides.items():
        section, _, name = key.partition(".")
        nested.setdefault(section, {})[name] = value
    return nested


def _unknown_key_message(source: str, section: str, name: str, defaults: Config) -> str:
    if section not in defaults:
        return f"{source}: unknown section [{section}]. Known sections: {', '.join(defaults)}."
    return (
        f"{source}: unknown key {name!r} in [{section}]. Known keys of [{section}]: "
        f"{', '.join(defaults[section])}."
    )


def _validation_message(error: ValidationError, source: str, defaults: Config) -> str:
    """One line per wrong value: the section, the key, what it is and what it must be."""
    lines = []
    for problem in error.errors():
        section, name = (list(problem["loc"]) + [""])[:2]
        if problem["type"] == "extra_forbidden":
            lines.append(_unknown_key_message(source, str(section), str(name), defaults))
            continue
        where = f"{source}: [{section}] {name} is {problem['input']!r}"
        field = PretrainSchema.model_fields[str(section)].annotation.model_fields[str(name)]  # type: ignore[union-attr]
        if problem["type"] == "literal_error":
            allowed = typing.get_args(field.annotation)
            lines.append(f"{where}; use one of {', '.join(allowed)}.")
        else:
            lines.append(f"{where}; {problem['msg'][0].lower()}{problem['msg'][1:]}.")
    return "\n".join(lines)


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
    """A run needs a limit to end at; a decaying schedule needs a step to end at; a floor above
    the peak is a typo."""
    if not (settings.max_steps or settings.max_epochs or settings.max_minutes):
        raise TrainingConfigError(
            f"{source}: [training] max_steps, max_epochs and max_minutes are all 0 (0 means no limit), "
            "so the run would never end: set at least one, e.g. --training.max_steps 1000."
        )
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
