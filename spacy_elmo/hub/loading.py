"""A biLM from anything the commands and `Annotator.from_model` take: the bundled or a published
biLM by name, our model directory, an ELMoForManyLangs model directory, or AllenNLP options.json +
HDF5 weights. Names follow the one rule of `hub.names` (the same as the pipeline's loaders)."""

from __future__ import annotations

from pathlib import Path

from ..bilm import BiLM
from ..bilm.errors import ConfigError
from ..bilm.io.elmoformanylangs import is_elmoformanylangs_dir
from ..bundled import BUNDLED_NAME
from .names import model_dir_for


def check_weights_option(model: Path, weights: Path | None) -> None:
    """`--weights` belongs to an AllenNLP options file: a model directory holds its own weights."""
    if weights is not None and model.is_dir():
        raise ConfigError(
            f"--weights {weights}: {model} is a model directory, which holds its own weights. "
            "--weights goes with an AllenNLP options file; leave it out."
        )


def load_bilm(model: str | Path, weights: Path | None, *, stateful: bool = False) -> BiLM:
    """A model directory (ours or ELMoForManyLangs'; or the bundled or a published biLM's name),
    or an AllenNLP options file with `--weights`."""
    model = model_dir_for(model)
    check_weights_option(model, weights)
    if is_elmoformanylangs_dir(model):
        return BiLM.from_elmoformanylangs(model, stateful=stateful)
    if model.is_dir():
        return BiLM.load(model, stateful=stateful)
    if not model.exists():
        raise ConfigError(
            f"{model} does not exist: give a model directory, {BUNDLED_NAME}, a published name "
            "(spacy-elmo download --list), or an AllenNLP options file with --weights."
        )
    if weights is None:
        raise ConfigError(
            f"{model} is not a model directory. For AllenNLP files pass the options file and "
            "--weights WEIGHTS.hdf5."
        )
    return BiLM.from_allennlp(model, weights, stateful=stateful)
