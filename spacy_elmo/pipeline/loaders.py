"""Weight sources for `[initialize.components.elmo.loader]`: each returns a function giving a `BiLM`.

Loaders run only in `nlp.initialize()`; afterwards the weights live inside the pipeline, so
`spacy.load()` needs neither these files nor network access.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from spacy.util import registry

from ..bilm.model import BiLM
from ..hub import PUBLISHED_MODELS, find_published_model, is_published_name, published_model_dir
from .errors import ElmoPipelineError

BiLMLoader = Callable[[], BiLM]
logger = logging.getLogger(__name__)


def _unset(path: str | Path | None) -> bool:
    return path is None or str(path) in ("", "None", "null")


def _existing(path: str | Path | None, key: str) -> Path:
    if _unset(path):
        raise ElmoPipelineError(
            f"[initialize.components.elmo.loader] {key} is not set: give the biLM files, e.g. "
            "`python -m spacy train config.cfg --paths.elmo path/to/bilm`."
        )
    path = Path(path)
    if not path.exists():
        raise ElmoPipelineError(
            f"[initialize.components.elmo.loader] {key}: {path} does not exist, and it is not the name "
            f"of a published biLM ({', '.join(PUBLISHED_MODELS)})."
        )
    return path


@registry.misc("spacy-elmo.ModelDir.v1")
def configure_model_dir_loader(path: str | None) -> BiLMLoader:
    """Our model directory (`config.json` + `model.safetensors`, as written by `BiLM.save`).

    `path` may also be the name of a published biLM (`original`, `small`, ...: see
    `spacy-elmo download --list`) where no file or directory of that name exists: an existing
    path always wins. A name is downloaded and converted into the cache on first use, so
    `--paths.elmo original` works with the shipped configs.

    path (Optional[str]): the directory or published name; null means the bundled English biLM.
    RETURNS (Callable[[], BiLM]): the loader `Elmo.initialize` calls.
    """

    def load() -> BiLM:
        if _unset(path):
            from ..bundled import BUNDLED_NAME, load_bundled_bilm

            logger.info(
                "[initialize.components.elmo.loader] path is null: using the bundled %s.", BUNDLED_NAME
            )
            return load_bundled_bilm()
        if is_published_name(str(path)) and not Path(path).exists():
            return BiLM.load(published_model_dir(str(path)))
        return BiLM.load(_existing(path, "path"))

    return load


@registry.misc("spacy-elmo.Published.v1")
def configure_published_loader(name: str = "original") -> BiLMLoader:
    """A published biLM by name (`spacy-elmo download --list`), downloaded once into the cache.

    name (str): the published name, e.g. "original", "small" or "pubmed".
    RETURNS (Callable[[], BiLM]): the loader `Elmo.initialize` calls.
    """
    find_published_model(name)  # an unknown name fails when the config is resolved

    def load() -> BiLM:
        return BiLM.load(published_model_dir(name))

    return load


@registry.misc("spacy-elmo.AllenNLP.v1")
def configure_allennlp_loader(options_file: str | None, weight_file: str | None) -> BiLMLoader:
    """An AllenNLP / bilm-tf `options.json` + HDF5 weight file pair.

    options_file (str): the options JSON.
    weight_file (str): the HDF5 weights.
    RETURNS (Callable[[], BiLM]): the loader `Elmo.initialize` calls.
    """

    def load() -> BiLM:
        return BiLM.from_allennlp(
            _existing(options_file, "options_file"), _existing(weight_file, "weight_file")
        )

    return load
