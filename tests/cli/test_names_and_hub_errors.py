"""Naming a biLM on the command line, and the hub's bad inputs: each a one-line error, nothing left
behind (cases 3, 4 and 14 of issue #56; the one naming rule of #55)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import h5py
import numpy as np
import pytest
import spacy
from spacy.tokens import DocBin
from spacy.util import load_config
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.configs import shipped_config

from ..bilm.efml_models import write_random_efml
from ..hub.test_efml_install import model_members

runner = CliRunner()
UNREACHABLE = "http://127.0.0.1:9/"  # the discard port: nothing listens


@pytest.mark.parametrize(
    ("mirror", "arguments", "message"),
    [
        (
            UNREACHABLE,
            ["download", "original"],
            "Error: http://127.0.0.1:9/models/elmo/2x4096_512_2048cnn_2xhighway/",
        ),
        (
            "not-a-url",
            ["download", "small"],
            "Error: SPACY_ELMO_MIRROR='not-a-url' is not a URL: give the root",
        ),
        (
            "not-a-url",
            ["embed", "small", "in.txt", "out.hdf5"],
            "Error: SPACY_ELMO_MIRROR='not-a-url' is not a URL",
        ),
        ("ftp://host/", ["info", "small"], "Error: SPACY_ELMO_MIRROR='ftp://host/' is not a URL"),
    ],
    ids=["no-network", "mirror-not-a-url", "embed-mirror-not-a-url", "info-mirror-not-a-url"],
)
def test_a_name_that_cannot_be_fetched_is_one_line_and_leaves_no_folder(
    tmp_path, monkeypatch, mirror, arguments, message
):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACY_ELMO_MIRROR", mirror)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("A sentence .\n", encoding="utf8")
    result = runner.invoke(app, arguments)
    assert result.exit_code == 1 and result.output.startswith(message), result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output, result.output
    leftovers = (
        sorted(path.name for path in (tmp_path / "cache").iterdir()) if (tmp_path / "cache").exists() else []
    )
    assert leftovers in ([], [".locks"]), leftovers


def test_a_cache_variable_naming_a_file_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("not a folder", encoding="utf8")
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "afile"))
    result = runner.invoke(app, ["download", "small"])
    expected = f"Error: SPACY_ELMO_CACHE={tmp_path / 'afile'} is a file, not a directory: point"
    assert result.exit_code == 1 and result.output.startswith(expected), result.output
    assert result.output.count("\n") == 1
    assert (tmp_path / "afile").read_text(encoding="utf8") == "not a folder"  # left as it was


@pytest.mark.slow
def test_spacy_train_without_network_says_so_in_one_line(tmp_path):
    nlp = spacy.blank("en")
    doc = nlp("Alice lives in Paris .")
    doc.ents = [doc.char_span(0, 5, label="PERSON")]
    DocBin(docs=[doc]).to_disk(tmp_path / "train.spacy")
    command = [sys.executable, "-m", "spacy", "train", str(shipped_config("ner_elmo.cfg"))]
    command += ["--paths.train", "train.spacy", "--paths.dev", "train.spacy", "--paths.elmo", "original"]
    environment = {"SPACY_ELMO_CACHE": str(tmp_path / "cache"), "SPACY_ELMO_MIRROR": UNREACHABLE}
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, **environment}
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("Error: [initialize.components.elmo.loader] http://127.0.0.1:9/"), (
        result.stderr
    )
    assert result.stderr.count("\n") == 1 and "cannot be reached" in result.stderr, result.stderr
    assert not (tmp_path / "cache" / "original").exists()


def test_init_config_writes_the_language_of_a_published_name(tmp_path):
    from ..pipeline.conftest import tiny_bilm

    for bilm, lang in (("efml-de", "de"), ("pt-brwac", "pt"), ("efml-cu", "xx"), ("small", "en")):
        output = tmp_path / f"{bilm}.cfg"
        result = runner.invoke(app, ["init-config", str(output), "--bilm", bilm])
        assert result.exit_code == 0, result.output
        assert f"lang = {lang!r}" in result.output
        config = load_config(output, interpolate=False)
        assert config["nlp"]["lang"] == lang and config["paths"]["elmo"] == bilm
    tiny_bilm().save(tmp_path / "model")
    result = runner.invoke(app, ["init-config", str(tmp_path / "dir.cfg"), "--bilm", str(tmp_path / "model")])
    assert result.exit_code == 0 and "--nlp.lang CODE" in result.output, result.output


def test_info_takes_every_name_the_resolver_takes_and_presets_by_option(hub_environment, tmp_path):
    hub_environment.publish_archive("efml-de", model_members(write_random_efml(tmp_path / "served")))
    hub_environment.publish("small", tmp_path / "served")
    result = runner.invoke(app, ["info", "efml-de"])
    assert result.exit_code == 0, result.output
    assert "ELMo biLM: efml-de (published: German" in result.output and "test sentence" in result.output
    result = runner.invoke(app, ["info", "small"])  # the published model (tiny here), not the preset
    assert result.exit_code == 0 and "published: English" in result.output, result.output
    assert "13,593,296" not in result.output
    result = runner.invoke(app, ["info", "--preset", "small"])
    assert result.exit_code == 0 and "preset 'small' (random weights)" in result.output
    assert "13,593,296" in result.output
    result = runner.invoke(app, ["info", "--preset", "huge"])
    assert result.exit_code == 1 and "--preset 'huge' is not a preset" in result.output


def test_a_bare_name_beside_a_folder_of_that_name_warns_and_dot_slash_asks_for_the_folder(
    hub_environment, tmp_path, monkeypatch
):
    from ..pipeline.conftest import tiny_bilm

    hub_environment.publish("small", tmp_path / "served")
    tiny_bilm(seed=2).save(tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("A sentence .\n", encoding="utf8")
    with pytest.warns(UserWarning, match="'small' names both the published biLM 'small'.*Write ./small"):
        result = runner.invoke(app, ["embed", "small", "in.txt", "published.hdf5"])
    assert result.exit_code == 0 and (tmp_path / "cache" / "small" / "model").is_dir(), result.output
    result = runner.invoke(app, ["embed", "./small", "in.txt", "folder.hdf5"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["embed", str(tmp_path / "small"), "in.txt", "absolute.hdf5"])
    assert result.exit_code == 0, result.output
    with h5py.File("published.hdf5") as published, h5py.File("folder.hdf5") as folder:
        with h5py.File("absolute.hdf5") as absolute:
            assert np.array_equal(folder["0"][()], absolute["0"][()])  # ./small is the folder
            assert not np.allclose(folder["0"][()], published["0"][()])  # which is not the published biLM


@pytest.mark.parametrize("how", ["load_bilm", "bilm_bundle", "ModelDir.v1"])
def test_each_way_of_loading_a_shadowed_name_resolves_it_once(hub_environment, tmp_path, monkeypatch, how):
    from spacy_elmo.corpus.ray.shipping import bilm_bundle
    from spacy_elmo.hub import AmbiguousNameWarning, load_bilm
    from spacy_elmo.pipeline.loaders import configure_model_dir_loader

    from ..pipeline.conftest import tiny_bilm

    hub_environment.publish("small", tmp_path / "served")
    tiny_bilm(seed=2).save(tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    load = {
        "load_bilm": lambda: load_bilm("small"),
        "bilm_bundle": lambda: bilm_bundle("small", None),
        "ModelDir.v1": configure_model_dir_loader("small"),
    }[how]
    with pytest.warns(AmbiguousNameWarning) as warned:
        load()
    assert [item.category for item in warned] == [AmbiguousNameWarning]
    assert (tmp_path / "cache" / "small" / "model").is_dir()  # the published biLM, not the folder


def test_info_warns_once_for_a_shadowed_published_name_and_not_for_a_preset(
    hub_environment, tmp_path, monkeypatch
):
    from spacy_elmo.hub.names import AmbiguousNameWarning

    from ..pipeline.conftest import tiny_bilm

    hub_environment.publish("small", tmp_path / "served")
    tiny_bilm(seed=2).save(tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    with pytest.warns(AmbiguousNameWarning) as warned:
        result = runner.invoke(app, ["info", "small"])
    assert result.exit_code == 0, result.output
    assert len([item for item in warned if item.category is AmbiguousNameWarning]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", AmbiguousNameWarning)
        result = runner.invoke(app, ["info", "small", "--preset", "small"])
    assert result.exit_code == 0 and "preset 'small'" in result.output, result.output
