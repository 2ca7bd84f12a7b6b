"""`run_corpus`, the one entry point of both engines: the options the command line refuses are
refused by the API too, before anything slow starts; the local engine writes what the commands
write."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from spacy_elmo.bilm.errors import ConfigError
from spacy_elmo.corpus import run_corpus
from spacy_elmo.corpus.summary import RunSummary


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("The cat sat .\n\nA dog ran .\n", encoding="utf8")
    return path


@pytest.mark.parametrize(
    "options, message",
    [
        ({"output": None}, "output=None: give the path"),
        ({"engine": "spark"}, "engine='spark': use local"),
        ({"batch_size": 0}, "batch_size=0: give a whole number of 1 or more"),
        ({"rows_per_file": 0, "engine": "ray"}, "rows_per_file=0: give a whole number"),
        ({"workers": 0, "engine": "ray"}, "workers=0: give a whole number of 1 or more"),
        ({"layers": "x"}, "layers='x': use one of all, top, average, mix, none"),
        ({"precision": "int4"}, "precision='int4': use one of fp32, bf16, int8, auto"),
        ({"workers": 2}, "workers steers the Ray engine"),
        ({"input_format": "csv"}, "input_format='csv': use text, jsonl or parquet"),
        ({"pipeline": "somewhere", "model": None, "precision": "int8"}, "precision='int8' steers a biLM"),
        ({"stateful": True, "engine": "ray"}, "stateful carries LSTM states"),
        ({"output": "file:///tmp/o.jsonl"}, "output='file:///tmp/o.jsonl': the local engine writes a file"),
    ],
)
def test_the_api_refuses_what_the_command_line_refuses(corpus, tmp_path, options, message):
    arguments = {"output": tmp_path / "out.jsonl", "model": "en_elmo_cpu", **options}
    output = arguments.pop("output")
    with pytest.raises(ConfigError) as error:
        run_corpus(corpus, output, **arguments)
    assert message in str(error.value)
    assert not (tmp_path / "None").exists() and not (tmp_path / "out.jsonl").exists()


def test_the_local_engine_embeds_into_json_lines_with_a_sidecar(corpus, tmp_path):
    summary = run_corpus(corpus, tmp_path / "out.jsonl", model="en_elmo_cpu", layers="top")
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf8").splitlines()]
    assert [row["id"] for row in rows] == [1, 2, 3] and rows[1]["tokens"] == []
    assert (summary.rows, summary.tokens) == (3, 8)
    assert re.fullmatch(
        r"Wrote 3 rows \(8 tokens\) to \S+ in \d+\.\d s "
        r"\(\d+\.\d s embedding: [\d,.]+ tokens/s\) in 1 process\.",
        summary.line(),
    )
    assert summary.seconds > summary.embedding_seconds > 0  # the whole run holds finding the model
    sidecar = json.loads((tmp_path / "_out.jsonl.meta.json").read_text(encoding="utf8"))
    assert sidecar["layers"] == "top" and sidecar["model"]["kind"] == "bilm"


def test_the_old_import_path_runs_on_ray_with_a_warning(corpus, tmp_path):
    """`spacy_elmo.scale.run_corpus` (0.1.0) still means the Ray engine: its own options are
    accepted (here refused for another reason, before a cluster starts), with a DeprecationWarning."""
    from spacy_elmo.scale import run_corpus as old_run_corpus

    with warnings.catch_warnings(record=True) as caught, pytest.raises(ConfigError, match="stateful carries"):
        warnings.simplefilter("always")
        old_run_corpus(corpus, tmp_path / "out", model="en_elmo_cpu", stateful=True)
    assert any(issubclass(warning.category, DeprecationWarning) for warning in caught)


def test_the_summary_gives_the_whole_time_and_the_embedding_rate():
    """A Ray run that took 10.2 s, 4.4 of them starting the cluster, said "5.8 s, 202.5 tokens/s"."""
    summary = RunSummary(1000, 20000, 10.2, 5.8, "on 2 Ray workers", "OUT")
    assert summary.line() == (
        "Wrote 1,000 rows (20,000 tokens) to OUT in 10.2 s (5.8 s embedding: 3,448 tokens/s) "
        "on 2 Ray workers."
    )
    assert RunSummary(1, 0, 0.0, 0.0, "in 1 process", "O").line() == (
        "Wrote 1 row (0 tokens) to O in 0.0 s (0.0 s embedding: 0.0 tokens/s) in 1 process."
    )
    assert "(7.8 s embedding: 0.4 tokens/s)" in RunSummary(2, 3, 16.0, 7.8, "", "O").line()
