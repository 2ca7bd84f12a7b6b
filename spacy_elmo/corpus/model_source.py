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

from ..bilm.errors import ConfigError
from ..bilm.io.elmoformanylangs import is_elmoformanylangs_dir
from ..bilm.io.model_dir import CONFIG_FILE, HEAD_FILE, WEIGHTS_FILE
from ..hub.cache import file_sha256
from ..hub.loading import locate_bilm

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
    from ..annotation import Annotator

    nlp = Annotator.from_pipeline(pipeline, layers="none").nlp
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-pipeline-") as saved:
        nlp.to_disk(saved)
        yield ModelSource("pipeline", str(pipeline), Path(saved), folder_sha256(Path(saved)))
