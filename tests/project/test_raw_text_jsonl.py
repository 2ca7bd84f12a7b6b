"""The raw text for `spacy pretrain` (system (b)): cut under the reader's length limit, no word lost."""

from __future__ import annotations

import importlib
import sys

import spacy
from spacy.training import JsonlCorpus

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "project" / "scripts"))  # as `python scripts/raw_text_jsonl.py` has it
raw_text_jsonl = importlib.import_module("raw_text_jsonl")

SENTENCES = [
    "The committee met on Tuesday in Geneva.",
    "It said that rates, which had risen twice, would stay where they were.",
    "Nobody asked why!",
    "Was it the bank or the river bank?",
]
RUN_ON = " ".join(f"word{index}" for index in range(45))  # one 45-token sentence, no punctuation


def test_chunks_are_whole_sentences_under_the_limit_and_keep_every_word(tmp_path):
    paragraphs = [" ".join(SENTENCES * 3), RUN_ON, "Short one."]
    max_tokens = 20
    texts = [record["text"] for record in raw_text_jsonl.chunked_records(paragraphs, max_tokens)]
    tokenizer = spacy.blank("en").tokenizer
    assert all(0 < len(tokenizer(text)) < max_tokens for text in texts)
    assert " ".join(texts).split() == " ".join(paragraphs).split()
    sentence_chunks = texts[: texts.index(next(text for text in texts if text.startswith("word0")))]
    assert all(text.endswith((".", "!", "?")) for text in sentence_chunks)
    assert len(sentence_chunks) > 1  # the 12-sentence paragraph did not fit one chunk


def test_spacy_pretrain_reader_reads_every_word_of_the_written_jsonl(tmp_path, monkeypatch):
    text = tmp_path / "train.txt"
    text.write_text(" ".join(SENTENCES * 40) + "\n\n" + " ".join([RUN_ON] * 3) + "\n", encoding="utf8")
    output = tmp_path / "raw_text.jsonl"
    monkeypatch.setattr(sys, "argv", ["raw_text_jsonl.py", str(text), str(output), "--max-tokens", "30"])
    raw_text_jsonl.main()
    nlp = spacy.blank("en")
    too_long_skipped = JsonlCorpus(output, max_length=30)(nlp)
    read_words = [token.text for example in too_long_skipped for token in example.reference]
    expected = [token.text for line in text.read_text().splitlines() if line for token in nlp(line)]
    assert read_words == expected
