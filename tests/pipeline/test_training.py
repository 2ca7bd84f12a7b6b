"""The EWT corpus converter, and the shipped configs trained with `spacy train` as users run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
import srsly
import torch
from spacy.cli.debug_config import debug_config
from spacy.tokens import DocBin
from typer.testing import CliRunner

from spacy_elmo.bilm import BiLM
from spacy_elmo.cli import app
from spacy_elmo.pipeline.corpus import convert_ewt, read_conllu
from spacy_elmo.pipeline.errors import ElmoPipelineError
from spacy_elmo.pipeline.layers import get_bilm

from .conftest import tiny_bilm

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def ewt_files(shared_data: Path, split: str) -> tuple[Path, Path]:
    uner = "en_ewt-ud-train.0c7ce0d.iob2" if split == "train" else f"en_ewt-ud-{split}.iob2"
    return shared_data / "ud_en_ewt" / f"en_ewt-ud-{split}.conllu", shared_data / "uner_en_ewt" / uner


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train.spacy (200 sentences), dev.spacy (40) and a tiny random biLM, written by the CLI."""
    path = tmp_path_factory.mktemp("ewt")
    runner = CliRunner()
    for split, limit in (("train", 200), ("dev", 40)):
        conllu, iob2 = ewt_files(shared_data, split)
        arguments = [
            "convert-ewt",
            str(conllu),
            str(iob2),
            str(path / f"{split}.spacy"),
            "--limit",
            str(limit),
        ]
        result = runner.invoke(app, arguments)
        assert result.exit_code == 0, result.output
        assert f"{limit} sentences" in result.output
    tiny_bilm(seed=1).save(path / "bilm")
    return path


def test_converted_corpus_has_parses_entities_and_the_original_text(corpus: Path, shared_data: Path) -> None:
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(corpus / "dev.spacy").get_docs(nlp.vocab))
    conllu, _ = ewt_files(shared_data, "dev")
    texts = [
        line[len("# text = ") :].rstrip("\n")
        for line in open(conllu, encoding="utf8")
        if line.startswith("# text = ")
    ]
    assert len(docs) == 40 and [doc.text.rstrip() for doc in docs] == texts[:40]
    assert all(doc.has_annotation("DEP") and doc.has_annotation("ENT_IOB") for doc in docs)
    bush = docs[1]
    assert [(ent.text, ent.label_) for ent in bush.ents][:1] == [("Bush", "PER")]
    assert bush[4].dep_ == "ROOT" and bush[1].head.i == 4 and bush[1].pos_ == "PROPN"
    labels = {ent.label_ for doc in docs for ent in doc.ents}
    assert labels <= {"PER", "ORG", "LOC"}


def test_full_dev_split_merges_all_but_the_mismatched_sentences(shared_data: Path, tmp_path: Path) -> None:
    report = convert_ewt(*ewt_files(shared_data, "dev"), tmp_path / "dev.spacy")
    assert (report.n_sentences, report.n_with_entities) == (2001, 1998)
    nlp = spacy.blank("en")
    docs = {doc.text: doc for doc in DocBin().from_disk(tmp_path / "dev.spacy").get_docs(nlp.vocab)}
    assert sum(not doc.has_annotation("ENT_IOB") for doc in docs.values()) <= 3


def test_multiword_tokens_keep_their_surface_spacing(shared_data: Path) -> None:
    conllu, _ = ewt_files(shared_data, "dev")
    sentence = next(s for s in read_conllu(conllu) if "n't" in s.words)
    index = sentence.words.index("n't")
    assert sentence.spaces[index - 1] is False


def test_converter_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conllu"
    bad.write_text("# sent_id = s1\n1\tword\n\n", encoding="utf8")
    iob2 = tmp_path / "ok.iob2"
    iob2.write_text("# sent_id = s1\n1\tword\tO\t-\t-\n\n", encoding="utf8")
    with pytest.raises(ElmoPipelineError, match="bad.conllu:2"):
        convert_ewt(bad, iob2, tmp_path / "out.spacy")
    with pytest.raises(ElmoPipelineError, match="does not exist"):
        convert_ewt(tmp_path / "absent.conllu", iob2, tmp_path / "out.spacy")


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
