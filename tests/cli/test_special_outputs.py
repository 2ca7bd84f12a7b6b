"""An output that is a device or a FIFO is refused in one line, with or without --force, and is
left as it was: outputs are written whole under a temporary name and renamed into place, which
would replace the special file with a regular one (`/dev/null`, run as root). An output in a
folder that cannot be written is refused before any work starts. Each command runs in a
subprocess, as a user runs it; a FIFO opened for writing would hang, hence the timeout."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .test_nothing_lost import model, pipeline_of, run  # noqa: F401  (the module's tiny biLM)

pytestmark = pytest.mark.slow  # commands in subprocesses: 3 to 10 s each


def char_device(path: Path) -> Path:
    """A copy of /dev/null's device (1, 3): needs root, as `mknod` does."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


SPECIAL_FILES: dict[str, tuple[Callable[[Path], Path], Callable[[int], bool], str]] = {
    "device": (char_device, stat.S_ISCHR, "a device or socket, not a file"),
    "fifo": (fifo, stat.S_ISFIFO, "a FIFO (named pipe)"),
}


@pytest.fixture(scope="module")
def pipeline(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return pipeline_of(model, tmp_path_factory.mktemp("pipeline"))


@pytest.mark.parametrize("special", sorted(SPECIAL_FILES))
@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("command", ["embed", "annotate"])
def test_embed_and_annotate_leave_a_special_output_as_it_is(
    command: str,
    force: bool,
    special: str,
    model: Path,  # noqa: F811
    pipeline: Path,
    tmp_path: Path,
) -> None:
    make, is_kind, described = SPECIAL_FILES[special]
    corpus = tmp_path / "t.txt"
    corpus.write_text("one line\nanother line\n", encoding="utf8")
    output = make(tmp_path / "special")
    source = model if command == "embed" else pipeline
    result = run(command, source, corpus, output, *(["--force"] if force else []))
    assert result.returncode == 1, result.stdout
    assert result.stderr.strip().splitlines() == [
        f"Error: The output {output} is {described}: spacy-elmo writes an output whole under a temporary "
        "name and then moves it into place, which would replace it. Give the path of a regular file."
    ]
    assert is_kind(output.lstat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["special", "t.txt"]


@pytest.mark.parametrize("special", sorted(SPECIAL_FILES))
def test_every_other_command_that_writes_refuses_a_special_output(special: str, tmp_path: Path) -> None:
    make, is_kind, described = SPECIAL_FILES[special]
    output = make(tmp_path / "train.cfg")
    result = run("init-config", output, "--force")
    assert result.returncode == 1, result.stdout
    assert f"The output {output} is {described}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert is_kind(output.lstat().st_mode) and [path.name for path in tmp_path.iterdir()] == ["train.cfg"]


@pytest.mark.parametrize("special", sorted(SPECIAL_FILES))
def test_the_ray_engine_refuses_a_special_output_before_a_cluster_starts(
    special: str,
    model: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    make, is_kind, described = SPECIAL_FILES[special]
    corpus = tmp_path / "t.txt"
    corpus.write_text("one line\n", encoding="utf8")
    output = make(tmp_path / "special")
    result = run("embed", model, corpus, output, "--engine", "ray", "--force")
    assert result.returncode == 1, result.stdout
    assert f"The output {output} is {described}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert is_kind(output.lstat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["special", "t.txt"]


@pytest.fixture
def immutable_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder in which not even root may create or delete a file (`chattr +i`), holding one file."""
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "kept.txt").write_text("kept\n", encoding="utf8")
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("needs chattr +i (root, on a filesystem with attributes)")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.mark.parametrize(
    "engine, name, force",
    [("local", "out.jsonl", False), ("ray", "out", False), ("ray", "", True)],
    ids=["local", "ray", "ray-force-over-it"],
)
def test_an_output_that_cannot_be_written_is_refused_before_the_work(
    engine: str, name: str, force: bool, pipeline: Path, immutable_folder: Path, tmp_path: Path
) -> None:
    """Before, a raw `Operation not permitted` (or pyarrow's `[Errno 1]`), with --force only once
    the whole run was computed."""
    corpus = tmp_path / "t.txt"
    corpus.write_text("one line\n", encoding="utf8")
    output, folder = immutable_folder / name if name else immutable_folder, immutable_folder
    result = run("annotate", pipeline, corpus, output, "--engine", engine, *(["--force"] if force else []))
    assert result.returncode == 1, result.stdout
    assert result.stderr.strip().splitlines() == [
        f"Error: Cannot write the output {output}: Operation not permitted in {folder}. Make {folder} "
        "writable, or give an output in a folder you can write."
    ]
    assert [path.name for path in immutable_folder.iterdir()] == ["kept.txt"]
    assert not (tmp_path / ".locked.spacy-elmo-run").exists()


@pytest.mark.parametrize("in_the_way", ["a file", "a symbolic link to nothing"])
def test_an_output_under_something_that_is_no_folder_is_named(
    in_the_way: str, pipeline: Path, tmp_path: Path
) -> None:
    """Before: `File exists in t.txt. Make t.txt writable`, which sent the user the wrong way."""
    corpus = tmp_path / "t.txt"
    corpus.write_text("one line\n", encoding="utf8")
    blocker = tmp_path / "blocker"
    if in_the_way == "a file":
        blocker.write_text("kept\n", encoding="utf8")
    else:
        blocker.symlink_to(tmp_path / "nowhere")
    result = run("annotate", pipeline, corpus, blocker / "out.jsonl")
    assert result.returncode == 1, result.stdout
    assert result.stderr.strip().splitlines() == [
        f"Error: Cannot write the output {blocker / 'out.jsonl'}: {blocker} is {in_the_way}, not a folder. "
        "Give an output in a folder."
    ]


@pytest.mark.parametrize(
    "engine, target", [("local", "model.safetensors"), ("ray", "")], ids=["local-weights", "ray-folder"]
)
def test_an_output_over_the_model_is_refused_even_with_force(
    engine: str,
    target: str,
    model: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Found trying hostile cases: `embed M t.txt M/model.safetensors --force` replaced the
    model's weights with its own output (and a Ray output folder over the model would replace
    the folder)."""
    corpus = tmp_path / "t.txt"
    corpus.write_text("one line\n", encoding="utf8")
    copy = tmp_path / "model"
    copy.mkdir()
    for file in model.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    before = {file.name: file.read_bytes() for file in copy.iterdir()}
    output = copy / target if target else copy
    result = run("embed", copy, corpus, output, "--engine", engine, "--force")
    assert result.returncode == 1, result.stdout
    where = "lies inside" if target else "is"
    assert result.stderr.strip().splitlines() == [
        f"Error: The output {output} {where} the model {copy}: writing it (or --force) would destroy the "
        "model. Give an output path outside it."
    ]
    assert {file.name: file.read_bytes() for file in copy.iterdir()} == before
