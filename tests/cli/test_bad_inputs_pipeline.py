"""Bad pipelines, weights and settings given to `spacy-elmo annotate` and `spacy train`, run in a
subprocess as a user runs them (issue #63): each is one `Error:` line naming what to change, never
a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from ..conftest import REPO_ROOT
from ..pipeline.conftest import loader_config, tiny_bilm


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad_pipeline_inputs")
    tiny_bilm().save(root / "bilm")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = loader_config(root / "bilm")
    nlp.initialize()
    nlp.to_disk(root / "pipeline")
    shutil.copytree(root / "pipeline", root / "cut_config")
    config = (root / "pipeline" / "config.cfg").read_text(encoding="utf8")
    (root / "cut_config" / "config.cfg").write_text(config[:200], encoding="utf8")
    shutil.copytree(root / "pipeline", root / "bad_meta")
    (root / "bad_meta" / "meta.json").write_text('{"lang": "en", ', encoding="utf8")
    (root / "zero.safetensors").write_bytes(b"")
    shutil.copytree(root / "bilm", root / "zero_weights")
    (root / "zero_weights" / "model.safetensors").write_bytes(b"")
    (root / "rows.jsonl").write_text(
        '{"id": 1, "text": "fine"}\n{"id": 2, "text": "a \\ud800 b"}\n', encoding="utf8"
    )
    words, tags = ["Alice", "met", "Bob", "."], ["B-PER", "O", "B-PER", "O"]
    DocBin(docs=[Doc(nlp.vocab, words=words, ents=tags)] * 4).to_disk(root / "train.spacy")
    return {"root": root}


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The `Error:` line a failed command printed on stderr; no traceback."""
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


ANNOTATE_CASES = {
    "a pipeline with a truncated config.cfg": (
        "cut_config",
        "Error: Cannot load the pipeline {root}/cut_config: its config.cfg is invalid (",
    ),
    "a pipeline with a bad meta.json": (
        "bad_meta",
        "Error: Cannot load the pipeline {root}/bad_meta: its meta.json cannot be read (",
    ),
    "a biLM directory": (
        "bilm",
        "Error: {root}/bilm is a biLM, not a pipeline: `spacy-elmo embed {root}/bilm",
    ),
    "a text with a lone surrogate": (
        "pipeline",
        'Error: rows.jsonl, line 2: row id 2: column "text" holds a lone surrogate',
    ),
}


@pytest.mark.parametrize("case", list(ANNOTATE_CASES))
def test_annotate_reports_a_bad_input_in_one_line(files: dict[str, Path], case: str) -> None:
    pipeline, expected = ANNOTATE_CASES[case]
    root = files["root"]
    arguments = ["annotate", str(root / pipeline), str(root / "rows.jsonl"), str(root / f"{pipeline}.jsonl")]
    done = subprocess.run([sys.executable, "-m", "spacy_elmo", *arguments], capture_output=True, text=True)
    assert one_error_line(done).startswith(expected.format(root=root))
    assert not (root / f"{pipeline}.jsonl").exists()


TRAIN_CASES = {
    "zero-byte weights": (
        ["--paths.elmo", "{root}/zero.safetensors"],
        "Error: [initialize.components.elmo.loader] path: {root}/zero.safetensors is a file, not a model "
        "directory",
    ),
    "a model directory with zero-byte weights": (
        ["--paths.elmo", "{root}/zero_weights"],
        "Error: [initialize.components.elmo.loader] path: {root}/zero_weights/model.safetensors is not a "
        "readable safetensors file",
    ),
    "a pipeline folder as the biLM": (
        ["--paths.elmo", "{root}/pipeline"],
        "Error: [initialize.components.elmo.loader] path: {root}/pipeline is a spaCy pipeline, not a biLM.",
    ),
    "a negative max_length": (
        ["--paths.elmo", "{root}/bilm", "--components.elmo.model.max_length", "-3"],
        "Error: max_length (-3) and max_batch_tokens (4096) of [components.elmo.model] must be at least 1.",
    ),
    "mix weights that overflow float32": (
        ["--paths.elmo", "{root}/bilm", "--components.elmo.mix_weights", "[1e39, 0, 0]"],
        "Error: [components.elmo] mix_weights = [1e+39, 0, 0]: give non-negative weights",
    ),
}


@pytest.mark.parametrize("case", list(TRAIN_CASES))
def test_spacy_train_reports_bad_weights_and_settings_in_one_line(
    files: dict[str, Path], tmp_path: Path, case: str
) -> None:
    overrides, expected = TRAIN_CASES[case]
    root = files["root"]
    train = str(root / "train.spacy")
    arguments = [str(REPO_ROOT / "configs" / "ner_elmo.cfg"), "--output", str(tmp_path / "out")]
    arguments += ["--paths.train", train, "--paths.dev", train, "--training.max_steps", "1"]
    arguments += [override.format(root=root) for override in overrides]
    done = subprocess.run(
        [sys.executable, "-m", "spacy", "train", *arguments], capture_output=True, text=True
    )
    assert one_error_line(done).startswith(expected.format(root=root))


def test_annotate_with_a_biLM_name_and_embed_with_a_pipeline_name_the_other_command(files: dict[str, Path]):
    root = files["root"]
    rows, out = str(root / "rows.jsonl"), str(root / "named.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "annotate", "en_elmo_cpu", rows, out],
        capture_output=True,
        text=True,
    )
    assert one_error_line(done).startswith("Error: en_elmo_cpu is a biLM, not a pipeline: `spacy-elmo embed")
    (root / "lines.txt").write_text("A line .\n", encoding="utf8")
    arguments = ["embed", str(root / "pipeline"), str(root / "lines.txt"), str(root / "named.hdf5")]
    done = subprocess.run([sys.executable, "-m", "spacy_elmo", *arguments], capture_output=True, text=True)
    expected = f"Error: {root}/pipeline is a spaCy pipeline, not a biLM. Give the biLM it was trained with; "
    assert one_error_line(done).startswith(expected + "`spacy-elmo annotate")
