"""The `spacy-elmo` command line: info, convert, export, and readable errors."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import numpy as np
from typer.testing import CliRunner

from spacy_elmo.bilm import BiLM, auto_precision
from spacy_elmo.cli import app

from ..bilm.random_weights import write_random_elmo

runner = CliRunner()


def test_info_on_a_preset_prints_the_published_parameter_count():
    result = runner.invoke(app, ["info", "--preset", "small"])
    assert result.exit_code == 0, result.output
    assert "13,593,296" in result.output and "3 layers x 256 dims" in result.output


def test_info_with_precision_auto_prints_the_measured_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path))
    monkeypatch.setattr(auto_precision, "BUDGET_SECONDS", 0.5)
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    result = runner.invoke(
        app, ["info", str(options_file), "--weights", str(weight_file), "--precision", "auto"]
    )
    assert result.exit_code == 0, result.output
    assert "Precision 'auto' on this machine" in result.output
    lines = [line.split() for line in result.output.splitlines() if line.strip().startswith("lstm.layers.")]
    assert len(lines) == 6 and all(line[1] in ("fp32", "bf16", "int8") for line in lines)
    assert "rows" in lines[0]  # measured (the largest products first; a busy machine may time no more)
    assert list((tmp_path / "precision").glob("*.json"))  # the next process reads the plan back
    result = runner.invoke(app, ["info", "--preset", "small", "--precision", "int8"])
    assert result.exit_code == 0 and ["token_encoder.convolution0", "fp32"] in [
        line.split() for line in result.output.splitlines()
    ]  # int8 has no convolutions


def test_convert_then_export_round_trips_through_the_cli(tmp_path):
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    result = runner.invoke(app, ["convert", str(options_file), str(weight_file), str(tmp_path / "model")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["info", str(tmp_path / "model")])
    assert result.exit_code == 0 and "test sentence" in result.output
    assert "softmax head" in result.output and "none (embedding only" in result.output
    result = runner.invoke(app, ["export", str(tmp_path / "model"), str(tmp_path / "back")])
    assert result.exit_code == 0, result.output
    original = BiLM.from_allennlp(options_file, weight_file).embed_sentences([["a", "test"]])[0]
    exported = BiLM.from_allennlp(tmp_path / "back" / "options.json", tmp_path / "back" / "weights.hdf5")
    assert np.array_equal(exported.embed_sentences([["a", "test"]])[0], original)


def test_convert_tells_an_elmoformanylangs_directory_from_an_allennlp_one(tmp_path):
    from ..bilm.efml_models import CHARACTERS, write_random_efml

    source = write_random_efml(tmp_path / "efml")
    result = runner.invoke(app, ["convert", str(source), str(tmp_path / "from-efml")])
    assert result.exit_code == 0, result.output
    assert "lexicon.json" in result.output and (tmp_path / "from-efml" / "lexicon.json").is_file()
    expected = BiLM.from_elmoformanylangs(source).embed_sentences([["Die", "Bank", "天気"]])[0]
    assert np.array_equal(
        BiLM.load(tmp_path / "from-efml").embed_sentences([["Die", "Bank", "天気"]])[0], expected
    )
    for model in (tmp_path / "from-efml", source):  # info (and embed) read either directory
        result = runner.invoke(app, ["info", str(model)])
        assert result.exit_code == 0 and f"the model's lexicon ({len(CHARACTERS) + 6} rows)" in result.output
        assert "5 dims x 18 words" in result.output
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    result = runner.invoke(app, ["convert", str(tmp_path / "allennlp"), str(tmp_path / "from-allennlp")])
    assert result.exit_code == 0, result.output
    expected = BiLM.from_allennlp(options_file, weight_file).embed_sentences([["a"]])[0]
    assert np.array_equal(BiLM.load(tmp_path / "from-allennlp").embed_sentences([["a"]])[0], expected)


def test_convert_explains_a_directory_it_cannot_read_and_a_missing_output(tmp_path):
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["convert", str(tmp_path / "empty"), str(tmp_path / "out")])
    assert result.exit_code == 1 and "holds neither an ELMoForManyLangs model" in result.output
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    result = runner.invoke(app, ["convert", str(options_file), str(weight_file)])
    assert result.exit_code == 1 and "convert OPTIONS WEIGHTS OUTPUT_DIR" in result.output
    result = runner.invoke(
        app, ["convert", str(tmp_path / "allennlp"), str(tmp_path / "a"), str(tmp_path / "b")]
    )
    assert result.exit_code == 1 and "convert MODEL_DIR OUTPUT_DIR" in result.output


def test_embed_writes_one_dataset_per_line_like_allennlp(tmp_path):
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    (tmp_path / "in.txt").write_text("The cat sat .\nHello\nThe cat sat .\nThe cat sat .\n")
    for layers, shape in (("all", (3, 4, 16)), ("top", (4, 16)), ("average", (4, 16))):
        output = tmp_path / f"{layers}.hdf5"
        result = runner.invoke(
            app,
            [
                "embed",
                str(options_file),
                str(tmp_path / "in.txt"),
                str(output),
                "-w",
                str(weight_file),
                "--layers",
                layers,
            ],
        )
        assert result.exit_code == 0, result.output
        with h5py.File(output, "r") as handle:
            assert handle["0"].shape == shape and handle["1"].shape[-2] == 1
            assert json.loads(handle["sentence_to_index"][0]) == {"The cat sat .": "3", "Hello": "1"}
            stored = handle["0"][...]
    with h5py.File(tmp_path / "all.hdf5", "r") as handle:
        want = BiLM.from_allennlp(options_file, weight_file).embed_sentences([["The", "cat", "sat", "."]])[0]
        np.testing.assert_allclose(handle["3"][...], want, atol=1e-6)
        assert len(handle) == 5  # four lines and sentence_to_index
    np.testing.assert_allclose(stored, want.mean(axis=0), atol=1e-6)


def test_embed_at_int8_writes_the_int8_vectors(tmp_path):
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    (tmp_path / "in.txt").write_text("The cat sat .\n")
    output = tmp_path / "int8.hdf5"
    arguments = ["embed", str(options_file), str(tmp_path / "in.txt"), str(output), "-w", str(weight_file)]
    result = runner.invoke(app, [*arguments, "--precision", "int8", "--layers", "all"])
    assert result.exit_code == 0, result.output
    sentence = [["The", "cat", "sat", "."]]
    want = BiLM.from_allennlp(options_file, weight_file).set_precision("int8").embed_sentences(sentence)[0]
    exact = BiLM.from_allennlp(options_file, weight_file).embed_sentences(sentence)[0]
    with h5py.File(output, "r") as handle:
        np.testing.assert_allclose(handle["0"][...], want, atol=1e-6, rtol=0)
        assert not np.allclose(handle["0"][...], exact, atol=1e-5)


def test_embed_keeps_a_blank_line_as_an_empty_row_and_reads_a_long_line_in_windows(tmp_path):
    """One rule for rows in every command: a blank line is a row without tokens. A line longer
    than the component's max_length (256) is embedded in windows of 256 tokens, as `nlp.pipe`
    embeds it, so memory stays bounded: each window's vectors are the biLM's own for it."""
    options_file, weight_file = write_random_elmo(tmp_path / "allennlp")
    long_line = [f"w{index % 50}" for index in range(600)]
    (tmp_path / "in.txt").write_text(f"fine\n\n{' '.join(long_line)}\n")
    arguments = ["embed", str(options_file), str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5")]
    result = runner.invoke(app, [*arguments, "-w", str(weight_file), "--layers", "all"])
    assert result.exit_code == 0, result.output
    bilm = BiLM.from_allennlp(options_file, weight_file)
    windows = bilm.embed_sentences([long_line[:256], long_line[256:512], long_line[512:]])
    with h5py.File(tmp_path / "o.hdf5", "r") as handle:
        assert sorted(handle) == ["0", "1", "2", "sentence_to_index"]
        assert handle["1"].shape == (3, 0, 16)
        np.testing.assert_allclose(handle["2"][...], np.concatenate(windows, axis=1), atol=1e-5, rtol=0)


def test_init_config_writes_a_shipped_config_with_the_biLM_and_refuses_what_does_not_exist(tmp_path):
    from spacy.util import load_config

    from spacy_elmo.configs import shipped_config

    output = tmp_path / "config.cfg"
    result = runner.invoke(
        app, ["init-config", str(output), "--pipeline", "parser,ner", "--bilm", "original"]
    )
    assert result.exit_code == 0, result.output
    written, shipped = (
        load_config(output, interpolate=False),
        load_config(shipped_config("ner_parser_elmo.cfg")),
    )
    assert written["paths"]["elmo"] == "original" and written["nlp"]["pipeline"] == shipped["nlp"]["pipeline"]
    assert (
        written["components"]
        == load_config(shipped_config("ner_parser_elmo.cfg"), interpolate=False)["components"]
    )
    shipped_lines = shipped_config("ner_parser_elmo.cfg").read_text(encoding="utf8").splitlines()
    changed = [
        (a, b)
        for a, b in zip(shipped_lines, output.read_text(encoding="utf8").splitlines(), strict=True)
        if a != b
    ]
    assert changed == [("elmo = null", 'elmo = "original"')]  # comments, order and the rest as shipped
    result = runner.invoke(app, ["init-config", str(tmp_path / "cnn.cfg"), "--pipeline", "parser", "--cnn"])
    assert result.exit_code == 0 and "elmo" not in load_config(tmp_path / "cnn.cfg")["nlp"]["pipeline"]
    assert (tmp_path / "cnn.cfg").read_text(encoding="utf8") == shipped_config("parser_cnn.cfg").read_text(
        encoding="utf8"
    )
    for arguments, message in (
        (["init-config", str(output)], "exists already: pass --force"),
        (
            ["init-config", str(tmp_path / "x.cfg"), "--pipeline", "tagger"],
            "choose one of ner, ner,parser, parser",
        ),
        (
            ["init-config", str(tmp_path / "y.cfg"), "--cnn", "--bilm", "small"],
            "the CNN baseline reads no biLM",
        ),
    ):
        result = runner.invoke(app, arguments)
        assert result.exit_code == 1 and message in result.output, result.output


def test_pretraining_configs_are_found_by_name_outside_a_clone(tmp_path, monkeypatch):
    from spacy_elmo.training import load_pretrain_config

    monkeypatch.chdir(tmp_path)  # no pretrain_tiny.cfg here: the shipped one is read
    assert load_pretrain_config("pretrain_tiny.cfg").model.lstm_dim == 32
    from spacy_elmo.configs import shipped_config

    local = (
        shipped_config("pretrain_tiny.cfg")
        .read_text(encoding="utf8")
        .replace("lstm_dim = 32", "lstm_dim = 24")
    )
    (tmp_path / "pretrain_tiny.cfg").write_text(local, encoding="utf8")
    assert load_pretrain_config("pretrain_tiny.cfg").model.lstm_dim == 24  # a local file wins


OUTPUT_TO_LOG = """
import subprocess, sys
from pathlib import Path
from spacy_elmo.cli.engines import output_to

with open(sys.argv[1], "w") as log, output_to(log) as terminal:
    print("a worker died: printed by Ray's driver")
    print("a warning", file=sys.stderr)
    subprocess.run([sys.executable, "-c", "import sys; print('a child says'); print('so', file=sys.stderr)"])
    print("our bar", file=terminal)
print("our summary")
"""


def test_what_ray_prints_during_a_run_goes_to_the_log_and_ours_to_the_terminal(tmp_path) -> None:
    """`--engine ray`'s runs send the process's and its children's standard output and error to
    a log (Ray's driver prints cluster errors to standard output); our bar reaches the terminal."""
    log = tmp_path / "ray.log"
    done = subprocess.run(
        [sys.executable, "-c", OUTPUT_TO_LOG, str(log)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "our summary\n" and done.stderr == "our bar\n"
    assert sorted(log.read_text(encoding="utf8").splitlines()) == sorted(
        ["a worker died: printed by Ray's driver", "a warning", "a child says", "so"]
    )
