"""How commands find a biLM: our model directory, or AllenNLP options.json + HDF5 weights."""

from __future__ import annotations

from pathlib import Path

from ..bilm import BiLM
from ..bilm.errors import ConfigError


def load_bilm(model: Path, weights: Path | None, *, stateful: bool = False) -> BiLM:
    """A model directory, or an AllenNLP options file together with `--weights`."""
    if model.is_dir():
        return BiLM.load(model, stateful=stateful)
    if weights is None:
        raise ConfigError(
            f"{model} is not a model directory. For AllenNLP files pass the options file and "
            "--weights WEIGHTS.hdf5."
        )
    return BiLM.from_allennlp(model, weights, stateful=stateful)
