"""Every output of the local engine says how it was made, as the Ray engine's Parquet parts do:
the spacy-elmo version, the model (kind, name, sha256: the same digest the Ray engine records),
the layers and the precision plan. HDF5 in a file attribute, Parquet in the schema metadata,
JSON lines in the sidecar `_NAME.meta.json`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

import spacy_elmo
from spacy_elmo.cli import app
from spacy_elmo.corpus.provenance import read_provenance, sidecar_path
from spacy_elmo.corpus.ray.shipping import pipeline_bundle

from ..pipeline.conftest import loader_config, saved_tiny_bilm

runner = CliRunner()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved_tiny_bilm(tmp_path_factory, "provenance_bilm")


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory, model: Path) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"precision": "int8"})
    nlp.config["initialize"]["components"]["elmo"] = loader_config(model)
    nlp.initialize()
    path = tmp_path_factory.mktemp("provenance_pipeline") / "pipeline"
    nlp.to_disk(path)
    return path


def invoke(*arguments: object) -> None:
    result = runner.invoke(app, list(map(str, arguments)))
    assert result.exit_code == 0, result.output


def weights_sha256(model: Path) -> str:
    return hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.parametrize("stateful", [False, True])
def test_embed_writes_its_provenance_into_the_hdf5_file(model, tmp_path, stateful):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n\nd e\n", encoding="utf8")
    output = tmp_path / "vectors.out"  # any name: the file is read as what it is
    options = ["--stateful"] if stateful else []
    invoke("embed", model, corpus, output, "--layers", "top", "--precision", "bf16", *options)
    assert read_provenance(output) == {
        "version": spacy_elmo.__version__,
        "model": {"kind": "bilm", "name": str(model), "sha256": weights_sha256(model)},
        "layers": "top",
        "precision": "bf16",
    }


def test_annotate_writes_its_provenance_into_parquet_and_beside_json_lines(pipeline, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": 1, "text": "x y"}\n', encoding="utf8")
    want = {
        "version": spacy_elmo.__version__,
        # the digest the Ray engine ships the pipeline under, and records in its parts
        "model": {"kind": "pipeline", "name": str(pipeline), "sha256": pipeline_bundle(pipeline).sha256},
        "layers": "mix",
        "precision": "int8",  # the pipeline's own setting, as it ran
    }
    invoke("annotate", pipeline, corpus, tmp_path / "out.parquet")
    assert read_provenance(tmp_path / "out.parquet") == want
    assert not sidecar_path(tmp_path / "out.parquet").exists()

    jsonl = tmp_path / "out.jsonl"
    invoke("annotate", pipeline, corpus, jsonl)
    assert sidecar_path(jsonl) == tmp_path / "_out.jsonl.meta.json"
    assert read_provenance(jsonl) == want
    assert [json.loads(line)["id"] for line in jsonl.read_text(encoding="utf8").splitlines()] == [1]


def test_a_run_that_writes_nothing_leaves_the_output_and_its_sidecar_as_they_were(pipeline, tmp_path):
    corpus, output = tmp_path / "corpus.jsonl", tmp_path / "out.jsonl"
    corpus.write_text('{"id": 1, "text": "x y"}\n', encoding="utf8")
    invoke("annotate", pipeline, corpus, output)
    before = (output.read_bytes(), sidecar_path(output).read_bytes())
    (tmp_path / "empty.jsonl").write_text("", encoding="utf8")
    result = runner.invoke(
        app, ["annotate", str(pipeline), str(tmp_path / "empty.jsonl"), str(output), "--force"]
    )
    assert result.exit_code == 1 and "has no rows" in result.output
    assert (output.read_bytes(), sidecar_path(output).read_bytes()) == before
    invoke("annotate", pipeline, corpus, output, "--force", "--layers", "none")
    assert read_provenance(output)["layers"] == "none"
