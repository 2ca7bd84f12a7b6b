"""What an input is, as a user's command reads it: a symbolic-link loop in a folder gives each
real file once, a glob skips hidden and `_` names as a folder does (unless its own pattern names
them), and a Parquet row without an id or a JSON id beyond 64 bits is one line naming the file and
the row. Each command runs in a subprocess; the listing is the one both engines use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow
import pyarrow.parquet
import pytest

from spacy_elmo.corpus.sources import find_corpus

from .test_nothing_lost import model, pipeline_of, run  # noqa: F401  (the module's tiny biLM)

pytestmark = pytest.mark.slow  # commands in subprocesses: 3 to 10 s each


@pytest.fixture(scope="module")
def pipeline(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return pipeline_of(model, tmp_path_factory.mktemp("pipeline"))


def ids_of(output: Path) -> list:
    return [json.loads(line)["id"] for line in output.read_text(encoding="utf8").splitlines()]


def test_a_link_loop_in_a_folder_gives_each_file_once(pipeline: Path, tmp_path: Path) -> None:
    """`ln -s . s/me` made one line 41 rows (`me/me/.../x.txt:1`)."""
    folder = tmp_path / "s"
    (folder / "sub").mkdir(parents=True)
    (folder / "x.txt").write_text("one line\n", encoding="utf8")
    (folder / "sub" / "y.txt").write_text("another line\n", encoding="utf8")
    (folder / "me").symlink_to(".")
    (folder / "sub" / "up").symlink_to("..")
    (folder / "again.txt").symlink_to("x.txt")
    assert [file.name for file in find_corpus(folder).files] == ["again.txt", "sub/y.txt"]
    result = run("annotate", pipeline, folder, tmp_path / "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert ids_of(tmp_path / "out.jsonl") == ["again.txt:1", "sub/y.txt:1"]


def test_a_link_to_a_folder_outside_is_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "z.txt").write_text("z\n", encoding="utf8")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "link").symlink_to(outside)
    assert [file.name for file in find_corpus(tmp_path / "s").files] == ["link/z.txt"]


def test_a_glob_skips_hidden_names_as_a_folder_does(pipeline: Path, tmp_path: Path) -> None:
    folder = tmp_path / "g"
    folder.mkdir()
    for name in ("a.txt", ".h.txt", "_u.txt"):
        (folder / name).write_text(f"{name} text\n", encoding="utf8")
    result = run("annotate", pipeline, folder / "*.txt", tmp_path / "glob.jsonl")
    assert result.returncode == 0, result.stderr
    assert ids_of(tmp_path / "glob.jsonl") == [1]  # one file: ids are its line numbers
    assert [file.name for file in find_corpus(folder).files] == ["a.txt"]
    assert [file.name for file in find_corpus(folder / ".*.txt").files] == [".h.txt"]


def test_a_null_parquet_id_is_one_line_naming_the_file_and_row(pipeline: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.parquet"
    pyarrow.parquet.write_table(
        pyarrow.table({"id": ["a", "b", None], "text": ["x", "y", "z"]}), corpus, row_group_size=2
    )
    result = run("annotate", pipeline, corpus, tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: c.parquet, row 3: its id is null: give every row an id (an integer or a string)."
    ]
    assert not (tmp_path / "out.jsonl").exists()


def test_an_id_beyond_64_bits_says_to_write_it_as_a_string(pipeline: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": 1, "text": "x"}\n{"id": 18446744073709551616, "text": "y"}\n', encoding="utf8")
    result = run("annotate", pipeline, corpus, tmp_path / "out.jsonl")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: c.jsonl, line 2: id 18446744073709551616 does not fit in a 64-bit integer (-2**63 to "
        '2**63-1), which the output stores: write it as a string ("18446744073709551616"), in every row of '
        "the file."
    ]


def test_a_file_rewritten_at_its_size_is_a_changed_file(tmp_path: Path) -> None:
    """What a resumed run compares: before, names and sizes only, so "a" -> "z" kept stale rows."""
    path = tmp_path / "a.txt"
    path.write_text("a\n", encoding="utf8")
    before = find_corpus(path).fingerprint()
    path.write_text("z\n", encoding="utf8")
    status = path.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 1_000_000_000))
    after = find_corpus(path).fingerprint()
    assert [file["size"] for file in before] == [file["size"] for file in after]
    assert before != after
    assert find_corpus(f"{tmp_path}/./").normalized_location() == find_corpus(tmp_path).normalized_location()
