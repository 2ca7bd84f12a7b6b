"""The model of a corpus run as files on disk, with the sha256 that names it in the output's
provenance: every engine resolves a biLM or a pipeline here, so that the local engine's outputs
and the Ray engine's name the same model by the same digest.

A biLM that is our model directory is used where it is; any other (AllenNLP options and HDF5
weights, ELMoForManyLangs) is converted once into a temporary model directory. A pipeline that is
a directory is used where it is; an installed package is saved once into a temporary folder.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import spacy
from spacy.language import Language
from thinc.api import ConfigValidationError

from ..bilm.errors import ConfigError, ElmoError
from ..bilm.io.elmoformanylangs import is_elmoformanylangs_dir
from ..bilm.io.model_dir import CONFIG_FILE, HEAD_FILE, WEIGHTS_FILE
from ..hub.cache import file_sha256
from ..hub.loading import locate_bilm, names_a_bilm

# files that no run needs: the pretraining head (hundreds of MB for a large vocabulary)
UNUSED_FILES = {HEAD_FILE}


@dataclass(frozen=True)
class ModelSource:
    """kind: "bilm" or "pipeline"; name: as the user gave it; folder: its files, loadable;
    sha256: of a biLM's weights file (`model.safetensors`), or of a pipeline's files (their
    names and the sha256 of each, in name order)."""

    kind: str
    name: str
    folder: Path
    sha256: str

    def identity(self) -> dict[str, str]:
        """The model as an output's provenance names it."""
        return {"kind": self.kind, "name": self.name, "sha256": self.sha256}


def used_files(folder: Path) -> list[Path]:
    """The files of a model folder that a run loads, in name order."""
    return [path for path in sorted(folder.rglob("*")) if path.is_file() and path.name not in UNUSED_FILES]


def folder_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in used_files(folder):
        digest.update(path.relative_to(folder).as_posix().encode("utf8") + b"\0")
        digest.update(bytes.fromhex(file_sha256(path)))
    return digest.hexdigest()


@contextmanager
def bilm_source(model: str | Path, weights: Path | None = None) -> Iterator[ModelSource]:
    """A biLM as `spacy-elmo embed` names it (a model directory, the bundled or a published name,
    an ELMoForManyLangs directory, an AllenNLP options file with `weights`), as our model
    directory; a converted one lives until the context ends."""
    located = locate_bilm(model, weights)
    folder = located.path
    if weights is None and folder.is_dir() and (folder / CONFIG_FILE).is_file():
        yield checked_bilm(model, folder, folder)
        return
    bilm = located.load()
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-convert-") as converted:
        bilm.save(converted)
        yield checked_bilm(model, folder, Path(converted))


def checked_bilm(model: str | Path, given: Path, folder: Path) -> ModelSource:
    if not (folder / WEIGHTS_FILE).is_file():
        kind = "an ELMoForManyLangs" if is_elmoformanylangs_dir(given) else "a"
        raise ConfigError(f"{given} is {kind} model directory without {WEIGHTS_FILE}.")
    return ModelSource("bilm", str(model), folder, file_sha256(folder / WEIGHTS_FILE))


@contextmanager
def pipeline_source(pipeline: str | Path) -> Iterator[ModelSource]:
    """A trained pipeline: a directory as it is, or an installed package saved once (it lives
    until the context ends)."""
    folder = Path(pipeline).expanduser()
    if folder.is_dir():
        yield ModelSource("pipeline", str(pipeline), folder, folder_sha256(folder))
        return
    nlp = load_pipeline(pipeline)
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-pipeline-") as saved:
        nlp.to_disk(saved)
        yield ModelSource("pipeline", str(pipeline), Path(saved), folder_sha256(Path(saved)))


def load_pipeline(pipeline: str | Path) -> Language:
    """`spacy.load`, with a pipeline it cannot load (missing, or a damaged meta.json or config.cfg)
    as one `ConfigError` naming the file."""
    name = str(pipeline)
    how = (
        "give a pipeline directory (as written by `spacy train` or nlp.to_disk) or an installed "
        "pipeline package; copy or save a damaged one again."
    )
    if names_a_bilm(pipeline):
        raise ConfigError(
            f"{name} is a biLM, not a pipeline: `spacy-elmo embed {name} INPUT OUTPUT` embeds text "
            "with a biLM; annotate runs a trained pipeline (spacy-elmo init-config, then spacy train)."
        )
    meta = Path(pipeline) / "meta.json"
    if meta.is_file():
        try:
            spacy.util.load_meta(meta)
        except ValueError as error:
            raise ConfigError(
                f"Cannot load the pipeline {name}: its meta.json cannot be read ({one_line(error)}): {how}"
            ) from None
    try:
        return spacy.load(pipeline)
    except ElmoError:
        raise
    except (ConfigValidationError, ImportError) as error:
        raise ConfigError(
            f"Cannot load the pipeline {name}: its config.cfg is invalid ({one_line(error)}): {how}"
        ) from None
    except (OSError, ValueError) as error:
        raise ConfigError(f"Cannot load the pipeline {name} ({one_line(error)}): {how}") from None


def one_line(error: Exception) -> str:
    """An error's message on one line; a config's validation errors as "field: problem; ..."."""
    if isinstance(error, ConfigValidationError) and error.errors:
        return "; ".join(f"{'.'.join(map(str, item['loc']))}: {item['msg']}" for item in error.errors)
    return " ".join(str(error).split())
