"""The project's EWT corpus converter: UD parses and UNER entities in one `.spacy` file."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "project" / "scripts"))
convert_ewt = importlib.import_module("convert_ewt")

CONLLU = (
    "# sent_id = s1\n"
    "# text = I don't see Ann Lee.\n"
    "1\tI\tI\tPRON\tPRP\tCase=Nom|Number=Sing|Person=1\t4\tnsubj\t_\t_\n"
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\tdo\tAUX\tVBP\tMood=Ind\t4\taux\t_\t_\n"
    "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_\n"
    "4\tsee\tsee\tVERB\tVB\tVerbForm=Inf\t0\troot\t_\t_\n"
    "5\tAnn\tAnn\tPROPN\tNNP\tNumber=Sing\t4\tobj\t_\t_\n"
    "6\tLee\tLee\tPROPN\tNNP\tNumber=Sing\t5\tflat\t_\tSpaceAfter=No\n"
    "7\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_\n"
    "\n"
    "# sent_id = s2\n"
    "# text = Hi Bob\n"
    "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"
    "2\tBob\tBob\tPROPN\tNNP\tNumber=Sing\t1\tvocative\t_\t_\n"
    "\n"
)
# s1: an I- after O starts an entity, OTH becomes O; s2: other words than UD's.
IOB2 = (
    "# sent_id = s1\n"
    "1\tI\tO\t-\t-\n2\tdo\tO\t-\t-\n3\tn't\tB-OTH\t-\t-\n4\tsee\tO\t-\t-\n"
    "5\tAnn\tI-PER\t-\t-\n6\tLee\tI-PER\t-\t-\n7\t.\tO\t-\t-\n"
    "\n"
    "# sent_id = s2\n"
    "1\tHi\tO\t-\t-\n2\tBobby\tB-PER\t-\t-\n"
    "\n"
)


def ewt_files(shared_data: Path, split: str) -> tuple[Path, Path]:
    """The UD .conllu and UNER .iob2 files of a split."""
    uner = "en_ewt-ud-train.0c7ce0d.iob2" if split == "train" else f"en_ewt-ud-{split}.iob2"
    return shared_data / "ud_en_ewt" / f"en_ewt-ud-{split}.conllu", shared_data / "uner_en_ewt" / uner


@pytest.fixture
def small_files(tmp_path: Path) -> tuple[Path, Path]:
    """CONLLU and IOB2 written to files."""
    conllu, iob2 = tmp_path / "small.conllu", tmp_path / "small.iob2"
    conllu.write_text(CONLLU, encoding="utf8")
    iob2.write_text(IOB2, encoding="utf8")
    return conllu, iob2


def read_docs(path: Path) -> list[Doc]:
    """The Docs of a .spacy file."""
    return list(DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))


def test_converted_corpus_has_parses_entities_and_the_original_text(
    shared_data: Path, tmp_path: Path
) -> None:
    conllu, iob2 = ewt_files(shared_data, "dev")
    convert_ewt.convert(conllu, iob2, tmp_path / "dev.spacy", limit=40)
    docs = read_docs(tmp_path / "dev.spacy")
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
    report = convert_ewt.convert(*ewt_files(shared_data, "dev"), tmp_path / "dev.spacy")
    assert (report.n_sentences, report.n_with_entities) == (2001, 1998)
    docs = {doc.text: doc for doc in read_docs(tmp_path / "dev.spacy")}
    assert sum(not doc.has_annotation("ENT_IOB") for doc in docs.values()) <= 3


def test_multiword_tokens_keep_their_surface_spacing(shared_data: Path) -> None:
    report = convert_ewt.ConversionReport()
    docs = convert_ewt.ewt_docs(*ewt_files(shared_data, "dev"), report)
    doc = next(doc for doc in docs if "n't" in [token.text for token in doc])
    index = [token.text for token in doc].index("n't")
    assert doc[index - 1].whitespace_ == ""


def test_a_small_corpus_keeps_every_annotation(small_files: tuple[Path, Path], tmp_path: Path) -> None:
    report = convert_ewt.convert(*small_files, tmp_path / "out.spacy")
    assert (report.n_sentences, report.n_with_entities, report.n_entities, report.mismatched) == (
        2,
        1,
        1,
        ["s2"],
    )
    first, second = read_docs(tmp_path / "out.spacy")
    assert first.text == "I don't see Ann Lee. " and [token.text for token in first][1:3] == ["do", "n't"]
    assert [token.lemma_ for token in first][:3] == ["I", "do", "not"]
    assert [token.pos_ for token in first][:2] == ["PRON", "AUX"] and first[1].tag_ == "VBP"
    assert str(first[0].morph) == "Case=Nom|Number=Sing|Person=1" and str(first[2].morph) == ""
    assert [token.head.i for token in first] == [3, 3, 3, 3, 3, 4, 3]
    assert first[3].dep_ == "ROOT" and first[4].dep_ == "obj"
    assert [(ent.text, ent.label_) for ent in first.ents] == [("Ann Lee", "PER")]  # I-PER after O
    assert [token.ent_iob_ for token in first] == ["O", "O", "O", "O", "B", "I", "O"]  # B-OTH -> O
    assert second.has_annotation("DEP") and not second.has_annotation("ENT_IOB")  # missing, not O
    assert [token.ent_iob_ for token in second] == ["", ""]


def test_limit_keeps_the_first_sentences_and_must_be_positive(
    small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    report = convert_ewt.convert(*small_files, tmp_path / "one.spacy", limit=1)
    assert report.n_sentences == 1 and len(read_docs(tmp_path / "one.spacy")) == 1
    with pytest.raises(SystemExit, match="limit is 0: give a positive number"):
        convert_ewt.convert(*small_files, tmp_path / "none.spacy", limit=0)
    assert not (tmp_path / "none.spacy").exists()


def test_an_empty_conllu_file_gives_an_empty_corpus(small_files: tuple[Path, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty.conllu"
    empty.write_text("", encoding="utf8")
    report = convert_ewt.convert(empty, small_files[1], tmp_path / "empty.spacy")
    assert report.n_sentences == 0 and read_docs(tmp_path / "empty.spacy") == []


def test_converter_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conllu"
    bad.write_text("# sent_id = s1\n1\tword\n\n", encoding="utf8")
    iob2 = tmp_path / "ok.iob2"
    iob2.write_text("# sent_id = s1\n1\tword\tO\t-\t-\n\n", encoding="utf8")
    with pytest.raises(SystemExit, match="bad.conllu:2"):
        convert_ewt.convert(bad, iob2, tmp_path / "out.spacy")
    good = tmp_path / "ok.conllu"
    good.write_text("# sent_id = s1\n1\tword\tword\tNOUN\tNN\t_\t0\troot\t_\t_\n\n", encoding="utf8")
    bad_iob2 = tmp_path / "bad.iob2"
    bad_iob2.write_text("# sent_id = s1\n1\tword\n\n", encoding="utf8")
    with pytest.raises(SystemExit, match="bad.iob2:2"):
        convert_ewt.convert(good, bad_iob2, tmp_path / "out.spacy")
    with pytest.raises(SystemExit, match="does not exist"):
        convert_ewt.convert(tmp_path / "absent.conllu", iob2, tmp_path / "out.spacy")
    assert not (tmp_path / "out.spacy").exists()


def test_the_script_overwrites_only_with_force_and_prints_a_summary(
    small_files: tuple[Path, Path], tmp_path: Path
) -> None:
    output = tmp_path / "out.spacy"
    output.write_text("keep me", encoding="utf8")
    command = [sys.executable, "scripts/convert_ewt.py", *map(str, small_files), str(output)]
    refused = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT / "project")
    assert refused.returncode == 1 and output.read_text(encoding="utf8") == "keep me"
    assert (
        refused.stderr.strip()
        == f"{output} exists already: pass --force to overwrite it, or give another path."
    )
    forced = subprocess.run([*command, "--force"], capture_output=True, text=True, cwd=REPO_ROOT / "project")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == (
        f"Wrote {output}: 2 sentences, 1 with entities (1 entities), 1 without (token mismatch or absent)."
    )
    assert len(read_docs(output)) == 2
