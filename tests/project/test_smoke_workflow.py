"""The project's `smoke` workflow end to end: assets, corpus, a tiny biLM, CNN vs ELMo NER, report."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def test_smoke_workflow_runs_end_to_end(tmp_path, shared_data):
    shutil.copytree(
        REPO_ROOT / "project", tmp_path / "project", ignore=shutil.ignore_patterns("assets", "corpus")
    )
    shutil.copytree(REPO_ROOT / "configs", tmp_path / "configs")
    overrides = {
        "shared_data": str(shared_data),
        "limit": "60",
        "pretrain_steps": "10",
        "train_steps": "20",
        "eval_frequency": "10",
        "jobs": "2",  # both runs train side by side, each writing its own log
    }
    command = [sys.executable, "-m", "weasel", "run", "smoke", str(tmp_path / "project")]
    command += [item for key, value in overrides.items() for item in (f"--vars.{key}", value)]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        command, capture_output=True, text=True, env=environment, cwd=tmp_path / "project"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    metrics = tmp_path / "project" / "metrics" / "smoke"
    for system in ("cnn", "elmo_hash"):
        log = (tmp_path / "project" / "training" / "smoke" / f"ner__{system}__1.0__seed0.log").read_text()
        assert "Saved pipeline to output directory" in log and "NER P" in log  # training and evaluation
    for system in ("cnn", "elmo_hash"):
        scores = json.loads((metrics / f"ner__{system}__1.0__seed0.json").read_text())
        assert 0.0 <= scores["ents_f"] <= 1.0
        out_of_domain = json.loads((metrics / f"ner__{system}__1.0__seed0.ood.json").read_text())
        assert 0.0 <= out_of_domain["ents_f"] <= 1.0 and out_of_domain != scores
    mixes = json.loads((metrics / "ner__elmo_hash__1.0__seed0.mix.json").read_text())
    assert len(mixes["ner"]["weights"]) == 3 and abs(sum(mixes["ner"]["weights"]) - 1) < 1e-5
    report = (metrics / "report.md").read_text()
    assert "(a) CNN tok2vec" in report and "(d) ELMo + hash embeddings" in report
    smoke_bilm = tmp_path / "project" / "models" / "bilm-smoke" / "model.safetensors"
    sha256 = hashlib.sha256(smoke_bilm.read_bytes()).hexdigest()
    assert f"| (d) ELMo + hash embeddings | 1 | 1 | `models/bilm-smoke` ({sha256[:12]}) | – | 20 |" in report
    assert (metrics / "mix_weights.png").exists()
    assert "### Out of domain: gains on the PUD test sets" in report
    assert (metrics / "in_vs_out_of_domain.png").exists()
