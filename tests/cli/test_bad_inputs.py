"""Bad inputs a new user tried (issue #56) and the first steps of the README: each mistake gets a
short message naming what to change, and nothing it touches is lost. Run in-process (CliRunner)."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import safetensors.torch
import typer.main
from typer.testing import CliRunner

from spacy_elmo.cli import app

from ..bilm.random_weights import write_random_elmo

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad_inputs")
    options, weights = write_random_elmo(root / "allennlp")
    model = root / "model"
    assert runner.invoke(app, ["convert", str(options), str(weights), str(model)]).exit_code == 0
    (root / "one.txt").write_text("The cat sat .\n", encoding="utf8")
    (root / "empty.txt").write_bytes(b"")
    (root / "only_bom.txt").write_bytes(b"\xef\xbb\xbf")
    (root / "link.txt").symlink_to(root / "one.txt")
    (root / "full_dir").mkdir()
    (root / "full_dir" / "keep.txt").write_text("mine", encoding="utf8")
    (root / "not_gzip.txt.gz").write_bytes(b"plain text\n")
    (root / "cut.txt.gz").write_bytes(gzip.compress(b"The cat sat .\n" * 100)[:-8])  # no trailer
    (root / "bad_syntax.cfg").write_text("[model\nlstm_dim = 8\n", encoding="utf8")
    shutil.copytree(model, root / "nan_model")
    tensors = safetensors.torch.load_file(root / "nan_model" / "model.safetensors")
    tensors["token_encoder.char_embedding"][3, 0] = float("nan")
    safetensors.torch.save_file(tensors, root / "nan_model" / "model.safetensors")
    shutil.copy(weights, root / "nan_weights.hdf5")
    with h5py.File(root / "nan_weights.hdf5", "r+") as handle:
        handle["char_embed"][5, 1] = float("inf")
    return {"root": root, "options": options, "weights": weights, "model": model}


# case: (arguments, exit status, what the message says)
CASES = {
    "embed onto its own input": (
        ["embed", "{model}", "{root}/one.txt", "{root}/one.txt", "--force"],
        1,
        "The output {root}/one.txt is the input file {root}/one.txt: writing it (or --force) would destroy "
        "the input.",
    ),
    "embed onto a link to its input": (
        ["embed", "{model}", "{root}/one.txt", "{root}/link.txt", "--force"],
        1,
        "The output {root}/link.txt (through links {root}/one.txt) is the input file {root}/one.txt",
    ),
    "embed an empty file": (
        ["embed", "{model}", "{root}/empty.txt", "{root}/empty.hdf5"],
        1,
        "Input file {root}/empty.txt is empty: give one whitespace-tokenised sentence per line.",
    ),
    "embed a file of only a byte-order mark": (
        ["embed", "{model}", "{root}/only_bom.txt", "{root}/bom.hdf5"],
        1,
        "only_bom.txt is empty",
    ),
    "embed into a directory": (
        ["embed", "{model}", "{root}/one.txt", "{root}/full_dir", "--force"],
        1,
        "The output {root}/full_dir is a directory; it must be a file: give a file path.",
    ),
    "embed with no rows per batch": (
        ["embed", "{model}", "{root}/one.txt", "{root}/zero.hdf5", "--batch-size", "0"],
        2,
        "Invalid value for '--batch-size'",
    ),
    "convert onto its own weights": (
        ["convert", "{options}", "{weights}", "{weights}", "--force"],
        1,
        "The output {weights} is the input {weights}: writing it would destroy the input.",
    ),
    "convert into a file": (
        ["convert", "{options}", "{weights}", "{root}/one.txt", "--force"],
        1,
        "The output {root}/one.txt is a file; it must be a directory: give a directory path.",
    ),
    "export onto its own model": (
        ["export", "{model}", "{model}", "--force"],
        1,
        "The output {model} is the input {model}",
    ),
    "evaluate with an unknown language": (
        ["evaluate", "en_elmo_cpu", "{root}/one.txt", "--lang", "xx-nope"],
        1,
        "spaCy has no language 'xx-nope' (the text's language: [corpus] lang, or evaluate's --lang)",
    ),
    "evaluate with no steps per row": (
        ["evaluate", "en_elmo_cpu", "{root}/one.txt", "--unroll-steps", "0"],
        2,
        "Invalid value for '--unroll-steps'",
    ),
    "evaluate with no rows per batch": (
        ["evaluate", "en_elmo_cpu", "{root}/one.txt", "--batch-size", "0"],
        2,
        "Invalid value for '--batch-size'",
    ),
    "evaluate with documents per paragraph": (
        ["evaluate", "en_elmo_cpu", "{root}/one.txt", "--document-per", "paragraph"],
        2,
        "'paragraph' is not one of 'line', 'file'",
    ),
    "evaluate writing its scores over the text": (
        ["evaluate", "en_elmo_cpu", "{root}/one.txt", "--output", "{root}/one.txt", "--force"],
        1,
        "The output {root}/one.txt is the input {root}/one.txt",
    ),
    "init-config with a biLM that is nowhere": (
        ["init-config", "{root}/new.cfg", "--bilm", "{root}/nowhere"],
        1,
        "--bilm {root}/nowhere: no such directory, and not a published name (spacy-elmo download --list) "
        "or en_elmo_cpu.",
    ),
    "init-config with a folder that is no model": (
        ["init-config", "{root}/new.cfg", "--bilm", "{root}/full_dir"],
        1,
        "--bilm {root}/full_dir: {root}/full_dir is not a spacy-elmo model directory: config.json is missing",
    ),
    # more bad inputs: weights, compressed text, configs, output paths
    "embed with NaN in a weight": (
        ["embed", "{root}/nan_model", "{root}/one.txt", "{root}/nan.hdf5"],
        1,
        "nan_model/model.safetensors: tensor 'token_encoder.char_embedding' holds 1 NaN or infinite "
        "value(s): the file is damaged, or training diverged.",
    ),
    "convert AllenNLP weights holding infinity": (
        ["convert", "{options}", "{root}/nan_weights.hdf5", "{root}/from_nan"],
        1,
        "nan_weights.hdf5: tensor 'char_embed' holds 1 NaN or infinite value(s)",
    ),
    "info with --weights beside a model directory": (
        ["info", "{model}", "--weights", "{weights}"],
        1,
        "--weights {weights}: {model} is a model directory, which holds its own weights.",
    ),
    "evaluate a .gz file that is not gzip": (
        ["evaluate", "en_elmo_cpu", "{root}/not_gzip.txt.gz"],
        1,
        "not_gzip.txt.gz is not a readable gzip file (Not a gzipped file",
    ),
    "evaluate a gzip file cut short": (
        ["evaluate", "en_elmo_cpu", "{root}/cut.txt.gz"],
        1,
        "cut.txt.gz is not a readable gzip file (Compressed file ended",
    ),
    "pretrain into a file": (
        ["pretrain", "pretrain_tiny.cfg", "{root}/one.txt", "--paths.train", "{root}/one.txt"],
        1,
        "The output directory {root}/one.txt is a file: give a directory path.",
    ),
    "pretrain with a config that does not parse": (
        ["pretrain", "{root}/bad_syntax.cfg", "{root}/run", "--paths.train", "{root}/one.txt"],
        1,
        "bad_syntax.cfg is not a valid config: File contains no section headers.",
    ),
    "pretrain on a file of only a byte-order mark": (
        ["pretrain", "pretrain_tiny.cfg", "{root}/bom_run", "--paths.train", "{root}/only_bom.txt"],
        1,
        "The training corpus {root}/only_bom.txt is empty: there is nothing to train on.",
    ),
    "init-config into a directory": (
        ["init-config", "{root}/full_dir", "--force"],
        1,
        "The output {root}/full_dir is a directory; it must be a file: give a file path.",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_input_gets_a_message_that_says_what_to_change(files: dict[str, Path], case: str) -> None:
    arguments, status, expected = CASES[case]
    before = {path: path.read_bytes() for path in files["root"].rglob("*") if path.is_file()}
    result = runner.invoke(app, [argument.format(**files) for argument in arguments])
    assert result.exit_code == status, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert expected.format(**files) in " ".join(result.output.replace("│", " ").split()), result.output
    assert {path: path.read_bytes() for path in files["root"].rglob("*") if path.is_file()} == before
    assert not (files["root"] / "new.cfg").exists()


def test_a_byte_order_mark_is_not_part_of_the_first_token(files: dict[str, Path]) -> None:
    root = files["root"]
    (root / "bom.txt").write_bytes(b"\xef\xbb\xbfThe cat sat .\n")
    for name in ("one", "bom"):
        result = runner.invoke(
            app, ["embed", str(files["model"]), str(root / f"{name}.txt"), str(root / f"{name}.h5")]
        )
        assert result.exit_code == 0, result.output
        assert "Wrote 1 row (" in result.output  # one row, not "1 rows"
    with h5py.File(root / "one.h5") as plain, h5py.File(root / "bom.h5") as marked:
        np.testing.assert_array_equal(marked["0"][()], plain["0"][()])
        assert marked["sentence_to_index"][0] == plain["sentence_to_index"][0]


def test_no_help_shows_a_metavar_after_a_flag() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in ["", *commands]:
        result = runner.invoke(app, [*name.split(), "--help"])
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.output, (name, result.output)


def test_help_lists_every_command_and_no_other() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.replace("│", " ").split())
    listed = text.split("ELMo biLMs for spaCy: ")[1].split(".")[0].replace(" and ", ", ").split(", ")
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    visible = {name for name, command in commands.items() if not command.hidden}
    assert sorted(listed) == sorted(visible)


def test_the_tiny_configs_own_command_runs_where_it_says(tmp_path: Path) -> None:
    """The comment's config argument names a config that exists from any working directory."""
    from spacy_elmo.training import load_pretrain_config

    comment = (ROOT / "configs" / "pretrain_tiny.cfg").read_text(encoding="utf8").splitlines()[1]
    config_argument = comment.split("spacy-elmo pretrain ")[1].split()[0]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert load_pretrain_config(config_argument).training.max_steps == 60
    finally:
        os.chdir(cwd)
