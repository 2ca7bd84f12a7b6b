"""Every file of an installed model is hashed at its first install and checked again where the
cache cannot vouch for it: a copied or moved cache, a file rewritten, a model installed again from
a mirror; and a file from a plain-HTTP source with no published checksum says so once."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.hub import HubError, find_published_model, published_model_dir
from spacy_elmo.hub.catalog import mirror_path

from ..bilm.efml_models import write_random_efml
from ..bilm.random_weights import write_random_elmo
from .test_efml_install import model_members

PLAIN_HTTP = "served over plain HTTP"


def flip_last_byte_keeping_size_and_times(path: Path) -> None:
    """Damage a file as a bad copy would, leaving its size and modification time as they were."""
    info = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


@pytest.mark.parametrize("how", ["copied", "moved"])
def test_a_copied_or_moved_cache_checks_every_file_and_converts_a_damaged_model_again(
    hub_environment, tmp_path, monkeypatch, how
):
    hub_environment.publish("small", tmp_path / "served")
    weights = published_model_dir("small") / "model.safetensors"
    converted = weights.read_bytes()
    if how == "copied":
        shutil.copytree(tmp_path / "cache", tmp_path / "elsewhere")  # copy2: times kept
    else:
        os.rename(tmp_path / "cache", tmp_path / "elsewhere")
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "elsewhere"))
    damaged = tmp_path / "elsewhere" / "small" / "model" / "model.safetensors"
    flip_last_byte_keeping_size_and_times(damaged)
    assert published_model_dir("small") == damaged.parent
    assert damaged.read_bytes() == converted
    hub_environment.files.clear()  # checked and recorded where it is now: no request, no hashing
    assert published_model_dir("small") == damaged.parent


def test_a_model_file_rewritten_in_place_is_converted_again(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    weights = published_model_dir("small") / "model.safetensors"
    converted = weights.read_bytes()
    weights.write_bytes(converted[:-1] + bytes([converted[-1] ^ 0xFF]))
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1_000_000))
    published_model_dir("small")
    assert weights.read_bytes() == converted


def serve_from_folder(mirror: Path, name: str, seed: int) -> None:
    """Place random AllenNLP files for `name` in a `file://` mirror folder."""
    made = write_random_elmo(mirror.parent / f"made-{seed}" / name, seed=seed)
    for url, path in zip(find_published_model(name).urls, made):
        served = mirror / mirror_path(url)
        served.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, served)


def test_a_model_installed_again_from_a_mirror_must_be_the_file_first_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACY_ELMO_MIRROR", (tmp_path / "mirror").as_uri())
    serve_from_folder(tmp_path / "mirror", "eu", seed=0)
    published_model_dir("eu")
    shutil.rmtree(tmp_path / "cache" / "eu")
    serve_from_folder(tmp_path / "mirror", "eu", seed=1)  # the mirror now holds other files
    result = CliRunner().invoke(app, ["download", "eu"])
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "but the file first installed there had" in result.output
    assert str(tmp_path / "cache" / "index.json") in result.output
    assert not (tmp_path / "cache" / "eu" / "weights.hdf5").exists()  # the options are the same
    assert not (tmp_path / "cache" / "eu" / "model").exists()
    serve_from_folder(tmp_path / "mirror", "eu", seed=0)  # the first install's files again
    assert (published_model_dir("eu") / "model.safetensors").is_file()


def test_a_corrupted_cached_file_refetched_as_another_file_is_refused(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    model_dir = published_model_dir("small")
    weights = model_dir.parent / "elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")  # damaged in the cache...
    other = write_random_elmo(tmp_path / "other", seed=1)[1].read_bytes()
    hub_environment.serve(find_published_model("small").weights_url, other)  # ...and replaced upstream
    with pytest.raises(HubError, match="another file than the first install's"):
        published_model_dir("small")
    assert not weights.exists()


def test_a_file_from_a_plain_http_source_says_once_where_it_comes_from(hub_environment, tmp_path, caplog):
    hub_environment.publish_archive("efml-de", model_members(write_random_efml(tmp_path / "served")))
    hub_environment.publish("small", tmp_path / "served")  # on AllenNLP's https server: no notice
    with caplog.at_level(logging.WARNING, logger="spacy_elmo.hub"):
        published_model_dir("efml-de")
        published_model_dir("efml-de")
        published_model_dir("small")
    notices = [record.getMessage() for record in caplog.records if PLAIN_HTTP in record.getMessage()]
    assert len(notices) == 1, notices
    assert "http://vectors.nlpl.eu/repository/11/142.zip" in notices[0]
    assert f"fetched from {hub_environment.root_url}repository/11/142.zip" in notices[0]
    assert "publishes no checksum" in notices[0] and "ELMoForManyLangs" in notices[0]


class OpensAFile:
    """A pickled object that, unpickled, would create `path`: what a hostile model file could run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (str(self.path), "w")


def test_a_model_file_that_would_run_code_is_refused_and_runs_nothing(hub_environment, tmp_path):
    """Weights are data: ELMoForManyLangs' torch files are read with `weights_only=True` (a guard
    of what the hub does already, from a server as a user gets it)."""
    marker = tmp_path / "code-ran"
    source = write_random_efml(tmp_path / "served")
    torch.save({"weight": OpensAFile(marker)}, source / "encoder.pkl")
    hub_environment.publish_archive("efml-de", model_members(source))
    with pytest.raises(HubError, match="encoder.pkl holds more than tensors"):
        published_model_dir("efml-de")
    assert not marker.exists()
    assert not (tmp_path / "cache" / "efml-de" / "model").exists()


def test_an_error_page_served_for_a_file_is_not_recorded_as_the_file_to_match(hub_environment, tmp_path):
    """A proxy's error page answered with 200 forms no model: nothing is recorded, so once the
    network is fixed, the install the error asks for (delete the folder, run again) succeeds."""
    _, weights = hub_environment.publish("small", tmp_path / "served")
    weights_url = find_published_model("small").weights_url
    hub_environment.serve(weights_url, b"<html>Please log in to the proxy</html>")
    with pytest.raises(HubError, match="do not form a biLM: delete"):
        published_model_dir("small")
    shutil.rmtree(tmp_path / "cache" / "small")
    hub_environment.serve(weights_url, weights)
    assert (published_model_dir("small") / "model.safetensors").is_file()
