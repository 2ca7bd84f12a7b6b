"""The shipped configs trained with `spacy train` as users run them, on EWT slices converted by the
project's `scripts/convert_ewt.py`."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
import srsly
import torch
from spacy.cli.debug_config import debug_config

from spacy_elmo.bilm import BiLM
from spacy_elmo.pipeline.layers import get_bilm
from tests.conftest import REPO_ROOT

from .conftest import tiny_bilm

sys.path.insert(0, str(REPO_ROOT / "project" / "scripts"))
convert_ewt = importlib.import_module("convert_ewt")

CONFIGS = REPO_ROOT / "configs"


def ewt_files(shared_data: Path, split: str) -> tuple[Path, Path]:
    uner = "en_ewt-ud-train.0c7ce0d.iob2" if split == "train" else f"en_ewt-ud-{split}.iob2"
    return shared_data / "ud_en_ewt" / f"en_ewt-ud-{split}.conllu", shared_data / "uner_en_ewt" / uner


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train.spacy (200 sentences), dev.spacy (40) and a tiny random biLM."""
    path = tmp_path_factory.mktemp("ewt")
    for split, limit in (("train", 200), ("dev", 40)):
        report = convert_ewt.convert(*ewt_files(shared_data, split), path / f"{split}.spacy", limit=limit)
        assert report.n_sentences == limit
    tiny_bilm(seed=1).save(path / "bilm")
    return path


@pytest.mark.parametrize(  # configs/pretrain_*.cfg are biLM pretraining configs (tests/training)
    "config", sorted(path.name for path in CONFIGS.glob("*.cfg") if not path.name.startswith("pretrain_"))
)
def test_shipped_configs_are_valid(config: str, corpus: Path, capsys: pytest.CaptureFixture) -> None:
    """What `python -m spacy debug config` checks, in this process (a subprocess each costs seconds)."""
    overrides = {"paths.train": str(corpus / "train.spacy"), "paths.dev": str(corpus / "dev.spacy")}
    debug_config(CONFIGS / config, overrides=overrides)
    assert "Config is valid" in capsys.readouterr().out


def spacy_command(*arguments: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "spacy", *arguments], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.slow
@pytest.mark.parametrize("config", ["ner_elmo.cfg", "ner_parser_elmo.cfg"])
def test_spacy_train_evaluate_and_package_a_shipped_config(config: str, corpus: Path, tmp_path: Path) -> None:
    spacy_command(
        "train",
        str(CONFIGS / config),
        "--output",
        str(tmp_path / "out"),
        "--paths.train",
        str(corpus / "train.spacy"),
        "--paths.dev",
        str(corpus / "dev.spacy"),
        "--paths.elmo",
        str(corpus / "bilm"),
        "--training.max_steps",
        "4",
        "--training.eval_frequency",
        "2",
    )
    model = tmp_path / "out" / "model-last"
    spacy_command(
        "evaluate", str(model), str(corpus / "dev.spacy"), "--output", str(tmp_path / "metrics.json")
    )
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert "ents_f" in metrics and (config == "ner_elmo.cfg" or "dep_las" in metrics)
    nlp = spacy.load(model)
    elmo = nlp.get_pipe("elmo")
    assert elmo.listening_components == (["ner"] if config == "ner_elmo.cfg" else ["ner", "parser"])
    trained, original = get_bilm(elmo.model).state_dict(), BiLM.load(corpus / "bilm").state_dict()
    assert all(torch.equal(trained[name], original[name]) for name in original)  # frozen = true
    (tmp_path / "packages").mkdir()
    spacy_command(
        "package",
        str(model),
        str(tmp_path / "packages"),
        "--name",
        "elmo_test",
        "--version",
        "0.0.1",
        "--build",
        "none",
    )
    requirements = srsly.read_json(tmp_path / "packages" / "en_elmo_test-0.0.1" / "meta.json")["requirements"]
    assert any(requirement.startswith("spacy-elmo>=") for requirement in requirements)
