"""Every CLI mistake a user made in trying the tool ends in one or two lines and exit status 1.

Each case runs the installed `spacy-elmo` in a subprocess, as a user does, so that what reaches the
terminal (and nothing else) is checked: no traceback, no progress bar before the error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from spacy_elmo.cli import app

from ..bilm.random_weights import write_random_elmo


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli_errors")
    options, weights = write_random_elmo(root / "allennlp")
    model = root / "model"
    assert CliRunner().invoke(app, ["convert", str(options), str(weights), str(model)]).exit_code == 0
    (root / "blank.txt").write_text("a fine line\n\nanother line\n", encoding="utf8")
    (root / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (root / "ok.txt").write_text("The cat sat .\n", encoding="utf8")
    (root / "existing.hdf5").write_bytes(b"anything")
    (root / "not_json.json").write_text("this is not JSON\n", encoding="utf8")
    return {"root": root, "options": options, "weights": weights, "model": model}


CASES = {
    "convert with its files swapped": (
        ["convert", "{weights}", "{options}", "{root}/out"],
        "is an HDF5 weight file. Give the options JSON first and the weights second",
    ),
    "convert with the options as weights": (
        ["convert", "{options}", "{options}", "{root}/out"],
        "is not a readable HDF5 file (it looks like JSON: the options file comes first)",
    ),
    "convert from a file that is not JSON": (
        ["convert", "{root}/not_json.json", "{weights}", "{root}/out"],
        "not_json.json is not valid JSON: Expecting value: line 1 column 1",
    ),
    "convert onto an existing model": (
        ["convert", "{options}", "{weights}", "{model}"],
        "exists already: pass --force to overwrite it",
    ),
    "info of a name that is nothing": (
        ["info", "no_such_model"],
        "no_such_model does not exist, and it is not en_elmo_cpu or a published name",
    ),
    "embed a file that is not UTF-8": (
        ["embed", "{model}", "{root}/latin1.txt", "{root}/latin1.hdf5"],
        "latin1.txt, line 1 is not UTF-8 (invalid continuation byte at byte 3 of the file)",
    ),
    "embed a missing file": (
        ["embed", "{model}", "{root}/missing.txt", "{root}/missing.hdf5"],
        "Input {root}/missing.txt does not exist.",
    ),
    "embed onto an existing output": (
        ["embed", "{model}", "{root}/ok.txt", "{root}/existing.hdf5"],
        "existing.hdf5 exists already: pass --force",
    ),
    "embed with a folder that is no model": (
        ["embed", "{root}", "{root}/ok.txt", "{root}/new.hdf5"],
        "is not a spacy-elmo model directory: config.json is missing",
    ),
    "export onto an existing folder": (
        ["export", "{model}", "{root}/allennlp"],
        "allennlp exists already: pass --force",
    ),
    "embed with a model that is nowhere": (
        ["embed", "{root}/no_model", "{root}/ok.txt", "{root}/nowhere.hdf5"],
        "{root}/no_model does not exist: give a model directory, en_elmo_cpu, a published name",
    ),
    "export a missing model": (
        ["export", "{root}/missing_model", "{root}/exported"],
        "Model directory {root}/missing_model does not exist.",
    ),
    "write where the system refuses": (
        ["convert", "{options}", "{weights}", "/proc/spacy-elmo-test"],
        "cannot use /proc/spacy-elmo-test",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_mistake_gets_a_short_message_and_status_1(files: dict[str, Path], case: str) -> None:
    arguments, expected = CASES[case]
    arguments = [argument.format(**files) for argument in arguments]
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", *arguments], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2 and lines[0].startswith("Error: "), done.stderr
    assert "Traceback" not in done.stderr
    assert expected.format(**files) in done.stderr


def test_force_overwrites_and_writes_the_same_model(files: dict[str, Path]) -> None:
    target = files["root"] / "forced"
    arguments = ["convert", str(files["options"]), str(files["weights"]), str(target)]
    assert CliRunner().invoke(app, arguments).exit_code == 0
    first = (target / "model.safetensors").read_bytes()
    assert CliRunner().invoke(app, arguments).exit_code == 1
    assert CliRunner().invoke(app, [*arguments, "--force"]).exit_code == 0
    assert (target / "model.safetensors").read_bytes() == first


def test_every_command_that_writes_takes_force_and_every_argument_has_help() -> None:
    command_group = typer.main.get_command(app)
    writes = {"convert", "export", "embed", "evaluate"}
    writes |= {"pretrain", "fine-tune", "export-checkpoint"}
    for name, command in command_group.commands.items():
        options = {option for parameter in command.params for option in getattr(parameter, "opts", [])}
        assert name not in writes or "--force" in options, f"{name} has no --force"
        for parameter in command.params:
            assert getattr(parameter, "help", None), f"{name}: {parameter.name} has no help text"
