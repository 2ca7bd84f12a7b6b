"""spacy-elmo as a guest in its user's process and machine: no file it was not given is written
(a link planted at a temporary path), and help or a refused argument answers before torch and
spaCy load. Each program runs in a subprocess, as a user runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT_S = 120

PLANTED_LINK = """
import os, sys, tempfile
from pathlib import Path
from spacy_elmo.cli import app

# the log's old name, predictable from the process id: planted before the command runs
planted = Path(tempfile.gettempdir()) / f"spacy-elmo-ray-{os.getpid()}.log"
planted.symlink_to(sys.argv[1])
try:
    app(["embed", "en_elmo_cpu", sys.argv[2], sys.argv[3], "--engine", "ray"])
finally:
    planted.unlink(missing_ok=True)
"""


def test_a_link_planted_at_the_ray_log_path_is_never_followed(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's only copy\n", encoding="utf8")
    arguments = [precious, tmp_path / "missing.txt", tmp_path / "out"]
    done = subprocess.run(
        [sys.executable, "-c", PLANTED_LINK, *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1 and "missing.txt" in done.stderr, done.stderr
    assert precious.read_text(encoding="utf8") == "the user's only copy\n"


LOADED_AFTER = """
import sys
from spacy_elmo.cli import app

try:
    app(sys.argv[1:])
except SystemExit:
    pass
loaded = [name for name in ("torch", "spacy", "thinc", "h5py", "ray") if name in sys.modules]
print(loaded, file=sys.stderr)
"""


def test_help_and_a_refused_argument_answer_before_torch_and_spacy_load() -> None:
    for arguments in (["--help"], ["embed", "--help"], ["annotate", "x", "y", "z", "--batch-size", "0"]):
        done = subprocess.run(
            [sys.executable, "-c", LOADED_AFTER, *arguments],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert done.stderr.splitlines()[-1] == "[]", (arguments, done.stderr)
        assert done.stdout or "Invalid value for '--batch-size'" in done.stderr


def test_the_usage_line_names_every_argument_in_capitals() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "embed", "--help"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert (
        done.stdout.splitlines()[0] == "Usage: python -m spacy_elmo embed [OPTIONS] {MODEL} {INPUT} {OUTPUT}"
    )


ALLENNLP_READER = """
import json, sys
import h5py

# a script written for `allennlp elmo`'s files: sentence i at key str(i), from 0
with h5py.File(sys.argv[1], "r") as handle:
    index = json.loads(handle["sentence_to_index"][0])
    lines = [line.strip() for line in open(sys.argv[2], encoding="utf8")]
    shapes = [handle[str(i)].shape for i in range(len(handle) - 1)]
    assert all(handle[index[line]].shape[-2] == len(line.split()) for line in lines)
print(shapes, index)
"""


def test_embed_writes_hdf5_that_a_script_for_allennlps_files_reads(tmp_path: Path) -> None:
    from ..bilm.random_weights import write_random_elmo

    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    corpus, output = tmp_path / "in.txt", tmp_path / "out.hdf5"
    corpus.write_text("The cat sat .\n  Hello  \nThe cat sat .\n", encoding="utf8")
    embed = ["embed", options_file, corpus, output, "-w", weight_file, "--layers", "all"]
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", *map(str, embed)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    read = subprocess.run(
        [sys.executable, "-c", ALLENNLP_READER, str(output), str(corpus)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout == "[(3, 4, 16), (3, 1, 16), (3, 4, 16)] {'The cat sat .': '2', 'Hello': '1'}\n"


def test_a_file_size_limit_reached_is_one_line_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """`ulimit -f` as a full disk: the HDF5 writes would fail (h5py then prints pages of errors and
    crashes at exit); the command says so in one line and removes its temporary file and lock."""
    import resource

    from ..pipeline.conftest import tiny_bilm

    tiny_bilm().save(tmp_path / "model")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {n} of a corpus\n" for n in range(3000)), encoding="utf8")
    limit = 500_000  # bytes: room for the first lines' vectors, not for all of them
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "embed", "model", "corpus.txt", "out.hdf5", "--layers", "all"],
        cwd=tmp_path,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: No room to write out.hdf5: "), done.stderr[-2000:]
    assert "500.0 KB at most (ulimit -f)" in lines[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt", "model"]


@pytest.mark.parametrize(
    ("stop", "status"),
    [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, 128 + signal.SIGINT)],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_stopped_local_run_says_so_in_one_line_and_leaves_nothing(
    tmp_path: Path, stop: int, status: int
) -> None:
    """SIGTERM ends the process by the signal (after cleaning up), Ctrl-C with status 130: both
    with one line, and no temporary file or lock left."""
    from ..pipeline.conftest import tiny_bilm
    from ..waiting import wait_for

    tiny_bilm().save(tmp_path / "model")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {n} of a corpus\n" for n in range(100_000)), encoding="utf8")
    arguments = ["embed", "model", "corpus.txt", "out.hdf5"]
    process = subprocess.Popen(
        [sys.executable, "-m", "spacy_elmo", *arguments], cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: list(tmp_path.glob(".out.hdf5.*.tmp")), "the temporary file", TIMEOUT_S)
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=TIMEOUT_S)
    finally:
        process.kill()
    assert process.returncode == status, stderr
    assert stderr.strip().splitlines()[-1:] == [
        f"Error: Stopped by {signal.Signals(stop).name}: the unfinished output was removed, outputs "
        "written before are kept; run the command again (pretrain and fine-tune: with --resume, from the "
        "last checkpoint)."
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus.txt", "model"]
