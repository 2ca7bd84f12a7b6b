"""`spacy-elmo download`: a published biLM by name, the list of names, one-line errors."""

from __future__ import annotations

from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.hub import PUBLISHED_MODELS

runner = CliRunner()


def test_download_list_prints_every_name_with_its_size_and_with_sources_its_urls():
    result = runner.invoke(app, ["download", "--list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for model in PUBLISHED_MODELS.values():
        assert sum(line.startswith(f"{model.name} ") for line in lines) == 1
        assert model.weights_url not in result.output
    assert "93.6M parameters, ~374 MB" in result.output
    result = runner.invoke(app, ["download", "--list", "--sources"])
    for model in PUBLISHED_MODELS.values():
        assert model.name in result.output and model.weights_url in result.output


def test_download_list_marks_the_models_in_the_cache(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    assert "[cached]" not in runner.invoke(app, ["download", "--list"]).output
    assert runner.invoke(app, ["download", "small"]).exit_code == 0
    marked = [
        line for line in runner.invoke(app, ["download", "--list"]).output.splitlines() if "[cached]" in line
    ]
    assert len(marked) == 1 and marked[0].startswith("small ")


def test_download_fetches_and_converts_a_name(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    result = runner.invoke(app, ["download", "small"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cache" / "small" / "model" / "model.safetensors").is_file()
    assert "--paths.elmo small" in result.output


def test_download_errors_are_one_line_messages(hub_environment):
    for arguments, message in (
        (["download", "nope"], "Known names: small"),
        (["download"], "--list"),
        (["download", "small"], "HTTP 404"),  # the local server holds nothing
    ):
        result = runner.invoke(app, arguments)
        assert result.exit_code == 1 and message in result.output, result.output
        assert (
            result.output.count("Error:") == 1
            and result.exception is None
            or isinstance(result.exception, SystemExit)
        )


def test_commands_that_read_a_biLM_take_a_published_name(hub_environment, tmp_path):
    """`embed` (and `fine-tune`, `evaluate`, which find models the same way) download by name."""
    hub_environment.publish("small", tmp_path / "served")
    (tmp_path / "in.txt").write_text("The cat sat .\n", encoding="utf8")
    result = runner.invoke(app, ["embed", "small", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cache" / "small" / "model" / "model.safetensors").is_file()
    assert "Wrote 1 row (" in result.output
