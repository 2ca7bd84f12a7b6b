"""Ship the model once: the command's process resolves the biLM or pipeline (downloads,
converts, reads the path) and packs its files; Ray's object store carries them to every worker,
which unpacks them into a private temporary folder and loads them. Worker nodes need neither the
model's path nor the internet nor a model cache."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...bilm.config import BiLMConfig
from ...bilm.io.model_dir import CONFIG_FILE
from ...pipeline.model_files import ModelSource, bilm_source, pipeline_source, used_files

if TYPE_CHECKING:
    from ..job import CorpusJob


@dataclass(frozen=True)
class ModelBundle:
    """The files of a biLM directory or a pipeline directory, by path relative to it.

    kind (str): "bilm" or "pipeline".
    name (str): the model as the user named it, for the output's provenance.
    sha256 (str): as `ModelSource` computes it, the same on every engine.
    read_from (Path): the folder the files were read from (an output may not lie in it).
    """

    kind: str
    name: str
    files: dict[str, bytes]
    sha256: str
    read_from: Path

    def identity(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "sha256": self.sha256}

    def vector_shape(self) -> tuple[int, int]:
        """(layers, width) of the biLM's output, read from the files without loading the model:
        a biLM's `config.json`, or the saved `elmo` component of a pipeline (the first one);
        (3, 1024), the widest published shape's, where a pipeline has none."""
        if self.kind == "bilm":
            document = json.loads(self.files[CONFIG_FILE])
            config = BiLMConfig.from_allennlp_options(document["options"], source=CONFIG_FILE)
            return config.n_output_layers, config.output_dim
        import srsly
        from confection import Config

        config = Config().from_str(self.files["config.cfg"].decode("utf8"), interpolate=False)
        for name, settings in config.get("components", {}).items():
            if settings.get("factory") == "elmo" and f"{name}/model" in self.files:
                dims = srsly.msgpack_loads(self.files[f"{name}/model"])["nodes"][0].get("dims", {})
                if dims.get("nL") and dims.get("nO"):
                    return int(dims["nL"]), int(dims["nO"])
        return 3, 1024

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


def bundled(source: ModelSource) -> ModelBundle:
    files = {
        path.relative_to(source.folder).as_posix(): path.read_bytes() for path in used_files(source.folder)
    }
    return ModelBundle(source.kind, source.name, files, source.sha256, source.folder)


def bilm_bundle(model: str | Path, weights: Path | None) -> ModelBundle:
    """A biLM as `spacy-elmo embed` names it, resolved (and converted) here once."""
    with bilm_source(model, weights) as source:
        return bundled(source)


def job_bundle(job: CorpusJob) -> ModelBundle:
    """The biLM (`model`) or pipeline a job runs, resolved once for every worker."""
    return bilm_bundle(job.model, job.weights) if job.model is not None else pipeline_bundle(job.pipeline)


def pipeline_bundle(pipeline: str | Path) -> ModelBundle:
    """A trained pipeline: a directory's files as they are, or an installed package saved once."""
    with pipeline_source(pipeline) as source:
        return bundled(source)
