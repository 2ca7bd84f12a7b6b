"""Where a run cuts its input into output files (`corpus.ray.cutting.PartCut`), without a cluster:
by rows, by the estimated Parquet size, spread over the workers for a small input, and the same
cut on every pass over the same file (what `--resume` relies on)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from spacy_elmo.corpus.ray.cutting import MIN_PART_INPUT_BYTES, READ_ROWS, PartCut, estimated_tokens
from spacy_elmo.corpus.sources import find_corpus


def text_file(folder: Path, rows: int, words: int = 5) -> Path:
    path = folder / "corpus.txt"
    path.write_text("".join(" ".join(["word"] * words) + "\n" for _ in range(rows)), encoding="utf8")
    return path


def parts(path: Path, cut: PartCut) -> list[list]:
    (file,) = find_corpus(path).files
    return [block.table.column("id").to_pylist() for block in cut.parts(file, name_ids=False)]


def test_rows_per_file_cuts_every_n_rows(tmp_path):
    cut = PartCut(rows_per_file=7, target_bytes=1, bytes_per_token=1, max_input_bytes=None)
    got = parts(text_file(tmp_path, 30), cut)
    assert [len(ids) for ids in got] == [7, 7, 7, 7, 2]
    assert sum(got, []) == list(range(1, 31))


def test_a_size_target_ends_a_file_once_its_estimate_reaches_it(tmp_path):
    """5 tokens a row at 100 bytes a token: 500 bytes a row; reads go READ_ROWS rows at a time,
    so a file of at least 40,000 bytes ends after the first read that reaches it."""
    cut = PartCut(rows_per_file=None, target_bytes=40_000, bytes_per_token=100, max_input_bytes=None)
    got = parts(text_file(tmp_path, 1000), cut)
    rows_for_target = -(-40_000 // 500)  # 80 rows
    per_file = -(-rows_for_target // READ_ROWS) * READ_ROWS  # whole reads: 128 rows
    assert [len(ids) for ids in got] == [per_file] * (1000 // per_file) + [1000 % per_file]
    assert sum(got, []) == list(range(1, 1001))
    assert parts(tmp_path / "corpus.txt", cut) == got  # the same cut on every pass


def test_a_small_input_is_spread_over_the_workers(tmp_path):
    corpus = text_file(tmp_path, 20_000)  # 25 bytes a line: 500,000 bytes
    size = corpus.stat().st_size
    cut = PartCut.for_run(None, 128 * 1024 * 1024, 1024, size, workers=2)
    assert cut.max_input_bytes == size // 4 > MIN_PART_INPUT_BYTES
    got = parts(corpus, cut)
    assert len(got) == 4 and sum(got, []) == list(range(1, 20_001))
    tiny = PartCut.for_run(None, 128 * 1024 * 1024, 1024, 1_000, workers=8)
    assert tiny.max_input_bytes == MIN_PART_INPUT_BYTES  # not files of a few rows each
    assert PartCut.for_run(50, 1, 1, size, workers=2).max_input_bytes is None  # rows given: as given


def test_tokens_are_estimated_from_text_and_tokens_columns(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [{"id": 1, "text": "three  words here"}, {"id": 2, "tokens": ["a", "b"]}, {"id": 3, "text": ""}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf8")
    (file,) = find_corpus(path).files
    cut = PartCut(rows_per_file=None, target_bytes=10**9, bytes_per_token=1, max_input_bytes=None)
    (block,) = list(cut.parts(file, name_ids=False))
    assert estimated_tokens(block.table) == 5
    assert block.table.column("tokens").to_pylist() == [None, ["a", "b"], None]  # rows of either form
    large = pa.table(
        {
            "text": pa.array(["a b", "c"], pa.large_string()),
            "tokens": pa.array([["x"], None], pa.large_list(pa.string())),
        }
    )
    assert estimated_tokens(large) == 4  # Parquet written by others: large strings and lists too


@pytest.mark.parametrize(
    "layers, per_token", [("average", 4 * 256 + 16), ("all", 4 * 3 * 256 + 16), ("none", 16)]
)
def test_a_tokens_bytes_follow_the_layers_written(layers, per_token):
    from spacy_elmo.corpus.ray.engine import output_bytes_per_token

    assert output_bytes_per_token((3, 256), layers) == per_token


def test_a_bundles_vector_shape_is_read_from_its_files(tmp_path):
    """Without loading the model: a biLM's config.json, a pipeline's saved elmo component."""
    import spacy

    from spacy_elmo.corpus.ray.shipping import bilm_bundle, pipeline_bundle

    assert bilm_bundle("en_elmo_cpu", None).vector_shape() == (3, 256)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    assert pipeline_bundle(tmp_path / "pipeline").vector_shape() == (3, 256)
