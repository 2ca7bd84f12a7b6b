"""Ship the model once: the command's process resolves the biLM or pipeline (downloads,
converts, reads the path) and packs its files; Ray's object store carries them to every worker,
which unpacks them into a private temporary folder and loads them. Worker nodes need neither the
model's path nor the internet nor a model cache."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..bilm.errors import ConfigError
from ..bilm.io.elmoformanylangs import is_elmoformanylangs_dir
from ..bilm.io.model_dir import CONFIG_FILE, HEAD_FILE, WEIGHTS_FILE
from ..hub.loading import locate_bilm

# files a worker never needs: the pretraining head (hundreds of MB for a large vocabulary)
NOT_SHIPPED = {HEAD_FILE}


@dataclass(frozen=True)
class ModelBundle:
    """The files of a biLM directory or a pipeline directory, by path relative to it.

    kind (str): "bilm" or "pipeline".
    name (str): the model as the user named it, for the output's provenance.
    sha256 (str): of the biLM's weights file, or of a pipeline's files (names and bytes, sorted).
    """

    kind: str
    name: str
    files: dict[str, bytes]
    sha256: str

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())

    @contextmanager
    def unpacked(self) -> Iterator[Path]:
        """A private temporary folder holding the files, removed on exit (after loading)."""
        folder = Path(tempfile.mkdtemp(prefix="spacy-elmo-model-"))
        try:
            for name, data in self.files.items():
                target = folder / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def folder_files(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name not in NOT_SHIPPED
    }


def bilm_bundle(model: str | Path, weights: Path | None) -> ModelBundle:
    """A biLM as `spacy-elmo embed` names it (a model directory, the bundled or a published name, an
    ELMoForManyLangs directory, an AllenNLP options file with `weights`), as our model directory."""
    located = locate_bilm(model, weights)  # resolved once, here on the driver
    folder = located.path
    if weights is None and folder.is_dir() and (folder / CONFIG_FILE).is_file():
        files = folder_files(folder)
    else:  # converted here once, rather than in every worker
        bilm = located.load()
        with tempfile.TemporaryDirectory(prefix="spacy-elmo-convert-") as converted:
            bilm.save(converted)
            files = folder_files(Path(converted))
    if WEIGHTS_FILE not in files:
        kind = "an ELMoForManyLangs" if is_elmoformanylangs_dir(folder) else "a"
        raise ConfigError(f"{folder} is {kind} model directory without {WEIGHTS_FILE}.")
    return ModelBundle("bilm", str(model), files, hashlib.sha256(files[WEIGHTS_FILE]).hexdigest())


def pipeline_bundle(pipeline: str | Path) -> ModelBundle:
    """A trained pipeline: a directory's files as they are, or an installed package saved once."""
    folder = Path(pipeline).expanduser()
    if folder.is_dir():
        files = folder_files(folder)
    else:
        from ..annotation import Annotator

        nlp = Annotator.from_pipeline(pipeline, layers="none").nlp
        with tempfile.TemporaryDirectory(prefix="spacy-elmo-pipeline-") as saved:
            nlp.to_disk(saved)
            files = folder_files(Path(saved))
    digest = hashlib.sha256()
    for name, data in files.items():
        digest.update(name.encode("utf8") + b"\0" + hashlib.sha256(data).digest())
    return ModelBundle("pipeline", str(pipeline), files, digest.hexdigest())
