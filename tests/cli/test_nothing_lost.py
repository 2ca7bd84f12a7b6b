"""The local engine loses nothing: a signal leaves no half-written file, a dead writer's leftovers
go with the next run, two writers of one output are refused, and inputs are read as they are
(a pipe once, suffixes in any case, bad bytes named by their offset in the file). Each command
runs in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import pyarrow.parquet
import pytest

from ..pipeline.conftest import tiny_bilm
from ..waiting import wait_for

pytestmark = pytest.mark.slow  # commands in subprocesses: 3 to 20 s each
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny_model")
    tiny_bilm().save(path)
    return path


def command(*arguments: object) -> list[str]:
    return [sys.executable, "-m", "spacy_elmo", *map(str, arguments)]


def run(*arguments: object, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command(*arguments), input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S)


def long_corpus(path: Path, lines: int = 20000) -> Path:
    path.write_text("".join(f"sentence number {n} of a long corpus\n" for n in range(lines)), encoding="utf8")
    return path


def test_sigterm_leaves_no_temporary_file_and_a_dead_writers_one_is_removed(model, tmp_path):
    corpus, output = long_corpus(tmp_path / "corpus.txt"), tmp_path / "out.hdf5"
    process = subprocess.Popen(command("embed", model, corpus, output), stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(tmp_path.glob(".out.hdf5.*.tmp")), "the temporary file")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=TIMEOUT_S)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGTERM  # ended by the signal, after cleaning up
    assert not list(tmp_path.glob(".out.hdf5*")) and not output.exists()

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f".out.hdf5.{int(dead.stdout)}-0123456789ab.tmp"  # as a SIGKILL leaves it
    stale.write_bytes(b"half an HDF5 file")
    small = tmp_path / "small.txt"
    small.write_text("a b\nc\n", encoding="utf8")
    assert run("embed", model, small, output).returncode == 0
    assert not stale.exists() and output.is_file()


def test_a_second_writer_of_one_output_is_refused_while_the_first_runs(model, tmp_path):
    """The first is stopped (SIGTERM) once the second was refused: long enough to overlap anywhere."""
    corpus, output = long_corpus(tmp_path / "corpus.txt", lines=200_000), tmp_path / "out.hdf5"
    first = subprocess.Popen(command("embed", model, corpus, output), stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(tmp_path.glob(".out.hdf5.*.tmp")), "the first writer")
        second = run("embed", model, corpus, output)
        assert first.poll() is None, "the first run ended before the second was refused"
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [
            f"Error: Another spacy-elmo command is writing {output} now: wait for it to end, or write to "
            "another path."
        ]
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=TIMEOUT_S)
    finally:
        first.kill()
    assert not output.exists() and not list(tmp_path.glob(".out.hdf5*"))  # lock and temporary gone


def test_annotate_and_embed_read_a_pipe_once(model, tmp_path):
    pipeline = pipeline_of(model, tmp_path)
    output = tmp_path / "out.jsonl"
    result = run("annotate", pipeline, "/dev/stdin", output, stdin="Alice went home.\n\nBob.\n")
    assert result.returncode == 0, result.stderr
    assert "Wrote 3 rows" in result.stdout
    rows = [json.loads(line) for line in output.read_text(encoding="utf8").splitlines()]
    assert [row["id"] for row in rows] == [1, 2, 3] and rows[1]["tokens"] == []
    embedded = run("embed", model, "/dev/stdin", tmp_path / "x.hdf5", stdin="a b\n\nc\n")
    assert embedded.returncode == 0, embedded.stderr
    with h5py.File(tmp_path / "x.hdf5") as handle:
        assert [handle[key].shape[-2] for key in ("0", "1", "2")] == [2, 0, 1]


def pipeline_of(model: Path, folder: Path) -> Path:
    script = (
        "import spacy, sys; nlp = spacy.blank('en'); nlp.add_pipe('elmo'); "
        "nlp.config['initialize']['components']['elmo'] = "
        "{'loader': {'@misc': 'spacy-elmo.ModelDir.v1', 'path': sys.argv[1]}}; "
        "nlp.initialize(); nlp.to_disk(sys.argv[2])"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(model), str(folder / "pipeline")], check=True, timeout=120
    )
    return folder / "pipeline"


def test_suffixes_in_any_case_and_bad_bytes_at_their_offset_in_the_file(model, tmp_path):
    pipeline = pipeline_of(model, tmp_path)
    upper = tmp_path / "corpus.JSONL"
    upper.write_text('{"id": "a", "text": "x y"}\n\n  \n', encoding="utf8")  # blank lines hold no row
    result = run("annotate", pipeline, upper, tmp_path / "upper.jsonl")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "upper.jsonl").read_text(encoding="utf8"))["id"] == "a"  # one row, as JSON
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"ok line\n" * 3750 + b"caf\xe9\n")  # the bad byte at 30,003
    result = run("annotate", pipeline, latin, tmp_path / "latin.jsonl")
    assert result.returncode == 1
    assert (
        "latin.txt, line 3751 is not UTF-8 (invalid continuation byte at byte 30,003 of the file)"
        in result.stderr
    )
    assert not (tmp_path / "latin.jsonl").exists()


def test_annotate_writes_parquet_for_a_parquet_output(model, tmp_path):
    """Local annotate wrote JSON text whatever the output was called (354 MB for 4,000 sentences)."""
    pipeline = pipeline_of(model, tmp_path)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "x y"}\n{"id": "b", "tokens": ["z"]}\n', encoding="utf8")
    result = run("annotate", pipeline, corpus, tmp_path / "out.parquet")
    assert result.returncode == 0, result.stderr
    table = pyarrow.parquet.read_table(tmp_path / "out.parquet")
    assert table.column("id").to_pylist() == ["a", "b"]
    assert table.column("tokens").to_pylist() == [["x", "y"], ["z"]]
    assert [len(row) for row in table.column("vectors").to_pylist()] == [2, 1]
    assert table.schema.field("vectors").type.value_type.list_size == 16
