"""What `spacy train`'s progress table says about the biLM: a loss column only where the biLM
trains, holding the squared gradients the listeners send back (what spaCy's tok2vec reports)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.training.initialize import init_nlp
from spacy.training.loop import train

from spacy_elmo.configs import shipped_config

from .conftest import TRAIN_DATA, tiny_bilm


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train.spacy from the NER examples of the pipeline tests, and a tiny random biLM."""
    path = tmp_path_factory.mktemp("loss_corpus")
    nlp = spacy.blank("en")
    docs = [Example.from_dict(nlp.make_doc(text), annotations).reference for text, annotations in TRAIN_DATA]
    DocBin(docs=docs).to_disk(path / "train.spacy")
    tiny_bilm(seed=1).save(path / "bilm")
    return path


def train_and_log(corpus: Path, tmp_path: Path, *, frozen: bool) -> tuple[str, list[dict]]:
    """Train the shipped NER config 6 steps (evaluating every 3) with spaCy's own training loop;
    the console table it printed and the rows its logger wrote as JSON lines."""
    overrides = {
        "paths.train": str(corpus / "train.spacy"),
        "paths.dev": str(corpus / "train.spacy"),
        "paths.elmo": str(corpus / "bilm"),
        "components.elmo.frozen": frozen,
        "training.max_steps": 6,
        "training.eval_frequency": 3,
    }
    config = spacy.util.load_config(shipped_config("ner_elmo.cfg"), overrides=overrides, interpolate=False)
    rows = tmp_path / "log.jsonl"
    config["training"]["logger"] = {
        "@loggers": "spacy.ConsoleLogger.v3",
        "progress_bar": None,
        "console_output": True,
        "output_file": str(rows),
    }
    nlp = init_nlp(config)
    table = io.StringIO()
    train(nlp, None, stdout=table, stderr=io.StringIO())
    return table.getvalue(), [json.loads(line) for line in rows.read_text().splitlines()]


def test_a_trained_biLM_reports_the_gradient_it_receives_as_its_loss(corpus: Path, tmp_path: Path) -> None:
    table, rows = train_and_log(corpus, tmp_path, frozen=False)
    assert "LOSS ELMO" in table
    assert [sorted(row["losses"]) for row in rows] == [["elmo", "ner"]] * 3  # steps 0, 3 and 6
    # step 0 is one update, where the NER's zero-initialised output layer sends back no gradient
    assert rows[0]["losses"]["elmo"] == 0 and all(row["losses"]["elmo"] > 0 for row in rows[1:]), rows


def test_a_frozen_biLM_has_no_loss_column(corpus: Path, tmp_path: Path) -> None:
    """Nothing trains a frozen biLM, so it has no loss to show (it used to show 0.00 throughout)."""
    table, rows = train_and_log(corpus, tmp_path, frozen=True)
    assert "LOSS ELMO" not in table and "LOSS NER" in table
    assert [sorted(row["losses"]) for row in rows] == [["ner"]] * 3
