"""Weight sources for `[initialize.components.elmo.loader]`: each returns a function giving a `BiLM`.

Loaders run only in `nlp.initialize()`; afterwards the weights live inside the pipeline, so
`spacy.load()` needs neither these files nor network access.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from spacy.util import registry

from ..bilm.errors import ElmoError
from ..bilm.model import BiLM
from ..hub import HubError, find_published_model, load_bilm, locate_bilm
from .errors import ElmoWeightsError

MODEL_DIR_FIX = (
    "Give a biLM: a model directory (config.json + model.safetensors, from spacy-elmo convert or "
    "pretrain) or a biLM name (en_elmo_cpu, spacy-elmo download --list), e.g. `--paths.elmo DIR`."
)

BiLMLoader = Callable[[], BiLM | None]
"""What `[initialize.components.elmo.loader]` gives: a function returning the biLM, or None for the
component's default (the bundled English biLM, for an English pipeline only)."""


def _unset(path: str | Path | None) -> bool:
    return path is None or str(path) in ("", "None", "null")


def _existing(path: str | Path | None, key: str) -> Path:
    if _unset(path):
        raise ElmoWeightsError(
            f"[initialize.components.elmo.loader] {key} is not set: give the biLM files, e.g. "
            "`python -m spacy train config.cfg --paths.elmo path/to/bilm`."
        )
    path = Path(path)
    if not path.exists():
        raise ElmoWeightsError(
            f"[initialize.components.elmo.loader] {key}: {path} does not exist, and it is not the name "
            "of a biLM (en_elmo_cpu, or a published name: spacy-elmo download --list)."
        )
    return path


@contextmanager
def _reported_as_loader_errors(key: str, fix: str = "") -> Iterator[None]:
    """A download or cache failure, or weights that cannot be read (an empty or damaged file),
    becomes an `ElmoWeightsError` that names the loader's setting, which spaCy's CLI shows as a
    message."""
    try:
        yield
    except ElmoWeightsError:
        raise
    except HubError as error:
        raise ElmoWeightsError(f"[initialize.components.elmo.loader] {error}") from None
    except ElmoError as error:
        raise ElmoWeightsError(f"[initialize.components.elmo.loader] {key}: {error}{fix}") from None


@registry.misc("spacy-elmo.ModelDir.v1")
def configure_model_dir_loader(path: str | None) -> BiLMLoader:
    """Our model directory (`config.json` + `model.safetensors`, as written by `BiLM.save`), an
    ELMoForManyLangs model directory, or a biLM by name: `en_elmo_cpu` or a published name
    (`original`, `small`, `efml-de`...: see `spacy-elmo download --list`), so
    `--paths.elmo original` works with the shipped configs.

    A bare name is a name even where a folder of that name exists (a warning says so): write
    `./small` for the folder. A published name is downloaded and converted into the cache on
    first use.

    path (Optional[str]): the directory or name; null gives the component's default, the bundled
        English biLM, which a pipeline in another language refuses.
    RETURNS (Callable[[], Optional[BiLM]]): the loader `Elmo.initialize` calls.
    """

    def load() -> BiLM | None:
        if _unset(path):
            return None
        with _reported_as_loader_errors("path", f" {MODEL_DIR_FIX}"):
            located = locate_bilm(str(path))
            _existing(located.path, "path")
            return located.load()

    return load


@registry.misc("spacy-elmo.Published.v1")
def configure_published_loader(name: str = "original") -> BiLMLoader:
    """A published biLM by name (`spacy-elmo download --list`), downloaded once into the cache.

    name (str): the published name, e.g. "original", "small" or "pubmed".
    RETURNS (Callable[[], BiLM]): the loader `Elmo.initialize` calls.
    """
    find_published_model(name)  # an unknown name fails when the config is resolved

    def load() -> BiLM:
        with _reported_as_loader_errors("name"):
            return load_bilm(name)

    return load


@registry.misc("spacy-elmo.AllenNLP.v1")
def configure_allennlp_loader(options_file: str | None, weight_file: str | None) -> BiLMLoader:
    """An AllenNLP / bilm-tf `options.json` + HDF5 weight file pair.

    options_file (str): the options JSON.
    weight_file (str): the HDF5 weights.
    RETURNS (Callable[[], BiLM]): the loader `Elmo.initialize` calls.
    """

    def load() -> BiLM:
        options, weights = _existing(options_file, "options_file"), _existing(weight_file, "weight_file")
        with _reported_as_loader_errors("options_file and weight_file"):
            return load_bilm(options, weights)

    return load
