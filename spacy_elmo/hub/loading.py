"""The one way a name becomes a loaded biLM: `locate_bilm` resolves a string once by the rule of
`hub.names` (the bundled biLM, a published biLM downloaded and converted on first use, or a path),
and `load_bilm` reads what it found: our model directory, an ELMoForManyLangs model directory, or
AllenNLP options.json + HDF5 weights. The commands, `Annotator.from_model`, the pipeline's loaders
and the Ray engine all load through here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..bilm import BiLM
from ..bilm.errors import ConfigError
from ..bilm.io.elmoformanylangs import is_elmoformanylangs_dir
from ..bilm.io.model_dir import CONFIG_FILE
from ..bundled import BUNDLED_NAME, BUNDLED_PATH
from .catalog import is_published_name
from .install import published_model_dir
from .names import ResolvedName, looks_like_path, resolve_name

SPACY_PIPELINE_FILES = ("config.cfg", "meta.json")


@dataclass(frozen=True)
class LocatedBiLM:
    """A biLM's name, resolved once, and where its files are.

    name (ResolvedName): what the string named (bundled, published or a path).
    path (Path): the model directory, or an AllenNLP options file.
    weights (Path | None): the AllenNLP HDF5 weights that go with an options file.
    """

    name: ResolvedName
    path: Path
    weights: Path | None = None

    def load(self, *, stateful: bool = False) -> BiLM:
        """The biLM, read by the format its files are in."""
        if is_spacy_pipeline_dir(self.path):
            raise ConfigError(
                f"{self.path} is a spaCy pipeline, not a biLM. Give the biLM it was trained with; "
                "`spacy-elmo annotate PIPELINE INPUT OUTPUT` is the command that runs a pipeline."
            )
        if is_elmoformanylangs_dir(self.path):
            return BiLM.from_elmoformanylangs(self.path, stateful=stateful)
        if self.path.is_dir():
            return BiLM.load(self.path, stateful=stateful)
        if not self.path.exists():
            raise ConfigError(
                f"{self.path} does not exist: give a model directory, {BUNDLED_NAME}, a published name "
                "(spacy-elmo download --list), or an AllenNLP options file with --weights."
            )
        if self.weights is None:
            raise ConfigError(
                f"{self.path} is a file, not a model directory; an AllenNLP options file goes with its "
                "HDF5 weights (--weights WEIGHTS.hdf5)."
            )
        return BiLM.from_allennlp(self.path, self.weights, stateful=stateful)


def is_spacy_pipeline_dir(path: Path) -> bool:
    """Whether `path` is a saved spaCy pipeline (which may hold a biLM, but is none)."""
    return all((path / name).is_file() for name in SPACY_PIPELINE_FILES)


def names_a_bilm(spec: str | Path) -> bool:
    """Whether `spec` is a biLM's name or a biLM's model directory; nothing is downloaded."""
    text, path = str(spec), Path(spec).expanduser()
    if path.exists():
        return (path / CONFIG_FILE).is_file() and not is_spacy_pipeline_dir(path)
    named = text == BUNDLED_NAME or is_published_name(text)
    return named and not isinstance(spec, Path) and not looks_like_path(text)


def check_weights_option(model: Path, weights: Path | None) -> None:
    """`--weights` belongs to an AllenNLP options file: a model directory holds its own weights."""
    if weights is not None and model.is_dir():
        raise ConfigError(
            f"--weights {weights}: {model} is a model directory, which holds its own weights. "
            "--weights goes with an AllenNLP options file; leave it out."
        )


def locate_bilm(model: str | Path, weights: Path | None = None) -> LocatedBiLM:
    """Where the biLM `model` names lives: resolved once (an ambiguous name warns once), a published
    biLM downloaded and converted into the cache on first use. Nothing is loaded."""
    name = resolve_name(model)
    if name.kind == "bundled":
        path = BUNDLED_PATH
    elif name.kind == "published":
        path = published_model_dir(name.text)
    else:
        path = Path(model).expanduser()
    check_weights_option(path, weights)
    return LocatedBiLM(name, path, weights)


def load_bilm(model: str | Path, weights: Path | None = None, *, stateful: bool = False) -> BiLM:
    """A model directory (ours or ELMoForManyLangs'; or the bundled or a published biLM's name), or
    an AllenNLP options file with `weights`."""
    return locate_bilm(model, weights).load(stateful=stateful)
