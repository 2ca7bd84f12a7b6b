"""The `spacy-elmo` command line: info, convert, export, and readable errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from typer.testing import CliRunner

from spacy_elmo.bilm import BiLM
from spacy_elmo.cli import app

from ..bilm.random_weights import write_random_elmo

runner = CliRunner()


def test_info_on_a_preset_prints_the_published_parameter_count():
    result = runner.invoke(app, ["info", "small"])
    assert result.exit_code == 0, result.output
    assert "13,593,296" in result.output and "3 layers x 256 dims" in result.output


def test_convert_then_export_round_trips_through_the_cli(tmp_path):
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    result = runner.invoke(app, ["convert", str(options_file), str(weight_file), str(tmp_path / "model")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["info", str(tmp_path / "model")])
    assert result.exit_code == 0 and "test sentence" in result.output
    result = runner.invoke(app, ["export", str(tmp_path / "model"), str(tmp_path / "back")])
    assert result.exit_code == 0, result.output
    original = BiLM.from_allennlp(options_file, weight_file).embed_sentences([["a", "test"]])[0]
    exported = BiLM.from_allennlp(tmp_path / "back" / "options.json", tmp_path / "back" / "weights.hdf5")
    assert np.array_equal(exported.embed_sentences([["a", "test"]])[0], original)


def test_errors_are_one_line_messages_not_tracebacks(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "info", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr
