"""Corpus streaming, sentence packing into stateful windows, vocabulary."""

from __future__ import annotations

import gzip
from collections import Counter

import pytest

from spacy_elmo.training.corpus import (
    DocumentReader,
    ListSentences,
    SentenceSplitter,
    SentenceStream,
    Vocabulary,
    WindowBatcher,
    corpus_files,
)
from spacy_elmo.training.errors import CorpusError


@pytest.fixture(scope="module")
def splitter() -> SentenceSplitter:
    return SentenceSplitter("en")


def test_windows_pack_wrapped_sentences_and_overlap_by_the_last_target():
    batcher = WindowBatcher(ListSentences([["a", "b", "c"], ["d", "e"], ["f"]]), batch_size=1, unroll_steps=3)
    windows = [batcher.next_batch() for _ in range(3)]
    assert [w.forward[0] for w in windows] == [
        ["<S>", "a", "b", "c"],
        ["c", "</S>", "<S>", "d"],
        ["d", "e", "</S>", "<S>"],
    ]
    # The backward LM reads each sentence reversed, at the same positions, with its own carried state.
    assert [w.backward[0] for w in windows] == [
        ["</S>", "c", "b", "a"],
        ["a", "<S>", "</S>", "e"],
        ["e", "d", "<S>", "</S>"],
    ]
    last = batcher.next_batch()
    assert last.forward[0] == ["<S>", "f", "</S>"] and last.n_tokens == 2  # a finite source: short
    assert batcher.next_batch() is None


def test_rows_take_sentences_in_turn_and_state_round_trips():
    sentences = [[f"w{index}"] * (index % 4 + 1) for index in range(40)]
    batcher = WindowBatcher(ListSentences(sentences), batch_size=3, unroll_steps=5)
    first = batcher.next_batch()
    assert first.forward[0][:2] == ["<S>", "w0"] and first.forward[1][:2] == ["<S>", "w2"]
    state = batcher.get_state()
    source_position = batcher.sentences.position
    expected = [batcher.next_batch() for _ in range(4)]
    replay = WindowBatcher(ListSentences(sentences), batch_size=3, unroll_steps=5)
    replay.set_state(state)
    replay.sentences.position = source_position
    assert [replay.next_batch() for _ in range(4)] == expected


def test_stream_reads_folders_gzip_and_per_file_documents_and_shards_by_rank(tmp_path, splitter):
    (tmp_path / "corpus" / "sub").mkdir(parents=True)
    (tmp_path / "corpus" / "a.txt").write_text("One two. Three four.\n\nFive six.\n")
    with gzip.open(tmp_path / "corpus" / "sub" / "b.txt.gz", "wt") as handle:
        handle.write("Seven eight.\n")
    (tmp_path / "corpus" / ".hidden").write_text("never read\n")
    files = corpus_files(str(tmp_path / "corpus"), "training")
    assert [path.name for path in files] == ["a.txt", "b.txt.gz"]
    per_line = DocumentReader(files)
    assert [text.strip() for text in per_line] == ["One two. Three four.", "", "Five six.", "Seven eight."]
    assert len(list(DocumentReader(files, "file"))) == 2

    def sentences(stream: SentenceStream, n: int) -> list[list[str]]:
        return [stream.next_sentence() for _ in range(n)]

    whole = SentenceStream(per_line, splitter)
    assert sentences(whole, 5) == [["One", "two", "."], ["Three", "four", "."], ["Five", "six", "."],
                                    ["Seven", "eight", "."], ["One", "two", "."]]  # fmt: skip
    assert whole.epoch == 1
    rank1 = SentenceStream(per_line, splitter, rank=1, world_size=2)
    assert sentences(rank1, 2) == [["Seven", "eight", "."], ["Seven", "eight", "."]]
    held_out = SentenceStream(per_line, splitter, first_document=2)
    assert sentences(held_out, 2) == [["Five", "six", "."], ["Seven", "eight", "."]]


def test_stream_state_resumes_inside_a_document(tmp_path, splitter):
    (tmp_path / "text.txt").write_text("A b. C d. E f.\nG h.\n")
    reader = DocumentReader([tmp_path / "text.txt"])
    stream = SentenceStream(reader, splitter)
    stream.next_sentence()
    state = stream.get_state()
    expected = [stream.next_sentence() for _ in range(4)]
    resumed = SentenceStream(reader, splitter)
    resumed.set_state(state)
    assert [resumed.next_sentence() for _ in range(4)] == expected


def test_a_rank_without_documents_says_so(tmp_path, splitter):
    (tmp_path / "one.txt").write_text("Only one document.\n")
    stream = SentenceStream(DocumentReader([tmp_path / "one.txt"]), splitter, rank=1, world_size=2)
    with pytest.raises(CorpusError, match="Rank 1 of 2 found no training sentences"):
        stream.next_sentence()


def test_vocabulary_from_counts_orders_by_frequency_and_maps_oov_to_unk(tmp_path):
    counts = Counter({"the": 5, "cat": 2, "a": 2, "rare": 1, "<S>": 9})
    vocabulary = Vocabulary.from_counts(counts, size=5, min_count=2)
    assert vocabulary.words == ["<S>", "</S>", "<UNK>", "the", "a"]
    assert vocabulary.ids(["the", "cat", "rare", "</S>"]) == [3, 2, 2, 1]
    assert Vocabulary.from_counts(counts, size=100, min_count=2).words[3:] == ["the", "a", "cat"]
    vocabulary.save(tmp_path / "vocab.txt")
    assert Vocabulary.load(tmp_path / "vocab.txt").words == vocabulary.words


def test_splitter_uses_spacy_tokens_and_drops_whitespace(splitter):
    assert splitter("Don't  stop.\n\nIt's   fine!") == [["Do", "n't", "stop", "."], ["It", "'s", "fine", "!"]]
