"""Published biLMs by name: download, resume, verify, convert once, and the errors on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from spacy_elmo.bilm import BiLM
from spacy_elmo.hub import (
    DownloadError,
    UnknownModelError,
    find_published_model,
    install,
    published_model_dir,
)
from spacy_elmo.hub.cache import cache_lock, file_sha256
from spacy_elmo.hub.catalog import ALLENNLP_SERVER, mirrored
from spacy_elmo.hub.download import partial_path
from spacy_elmo.hub.install import file_name

SENTENCE = [["The", "bank", "raised", "rates", "."]]


def cached_weights(tmp_path, name="small"):
    return tmp_path / "cache" / name / file_name(find_published_model(name).weights_url)


def test_a_name_is_downloaded_converted_and_loads_like_the_allennlp_files(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    model_dir = published_model_dir("small")
    assert model_dir == tmp_path / "cache" / "small" / "model"
    source = tmp_path / "served" / "small"
    expected = BiLM.from_allennlp(source / "options.json", source / "weights.hdf5").embed_sentences(SENTENCE)
    assert np.array_equal(BiLM.load(model_dir).embed_sentences(SENTENCE)[0], expected[0])
    index = json.loads((tmp_path / "cache" / "index.json").read_text())
    assert len(index["files"]) == 2 and list(index["converted"]) == ["small"]
    assert not list((tmp_path / "cache" / "small").glob("*.part"))


def test_a_second_load_uses_the_cache_without_the_network(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    published_model_dir("small")
    hub_environment.files.clear()  # the server now answers 404 to everything
    assert (published_model_dir("small") / "model.safetensors").is_file()
    assert len(hub_environment.requests) == 2


def test_a_transfer_cut_mid_file_is_resumed_with_a_range_request(hub_environment, tmp_path):
    _, weights = hub_environment.publish("small", tmp_path / "served")
    hub_environment.cut_after, hub_environment.cuts_left = 1000, 1
    published_model_dir("small")
    weights_requests = [asked for path, asked in hub_environment.requests if path.endswith(".hdf5")]
    assert weights_requests[-1] == "bytes=1000-"
    assert cached_weights(tmp_path).read_bytes() == weights


def test_a_transfer_cut_every_time_stops_cleanly_and_the_next_call_resumes(hub_environment, tmp_path):
    _, weights = hub_environment.publish("small", tmp_path / "served")
    hub_environment.cut_after, hub_environment.cuts_left = 500, 99
    with pytest.raises(DownloadError, match="received 1,500 bytes.*run again to resume"):
        published_model_dir("small")
    assert not (tmp_path / "cache" / "small" / "model").exists()
    assert not cached_weights(tmp_path).exists()
    assert partial_path(cached_weights(tmp_path)).stat().st_size == 1500
    hub_environment.cuts_left = 0
    published_model_dir("small")
    assert hub_environment.requests[-1][1] == "bytes=1500-"
    assert cached_weights(tmp_path).read_bytes() == weights


def test_a_server_that_ignores_range_is_read_again_from_the_start(hub_environment, tmp_path):
    _, weights = hub_environment.publish("small", tmp_path / "served")
    hub_environment.cut_after, hub_environment.cuts_left, hub_environment.ignore_range = 1000, 1, True
    published_model_dir("small")
    assert cached_weights(tmp_path).read_bytes() == weights


def test_fewer_bytes_than_the_announced_length_is_an_error_and_caches_nothing(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    hub_environment.extra_announced = 10
    with pytest.raises(DownloadError, match="where the server announced") as error:
        published_model_dir("small")
    assert str(tmp_path / "cache" / "small") in str(error.value)
    assert not (tmp_path / "cache" / "small" / "model").exists()
    assert not list((tmp_path / "cache" / "small").glob("*.json"))


def test_a_missing_file_names_the_url_and_how_to_place_the_files_by_hand(hub_environment, tmp_path):
    with pytest.raises(DownloadError) as error:
        published_model_dir("small")
    message = str(error.value)
    assert "HTTP 404" in message and hub_environment.root_url in message
    assert "spacy-elmo convert" in message and "--paths.elmo DIR" in message
    assert str(tmp_path / "cache" / "small") in message and "\n" not in message


def test_an_unreachable_server_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACY_ELMO_MIRROR", "http://127.0.0.1:9/")  # discard port: nothing listens
    with pytest.raises(DownloadError, match="cannot be reached.*place them in"):
        published_model_dir("small")


def test_a_corrupted_cached_file_is_detected_by_its_sha256_and_fetched_again(hub_environment, tmp_path):
    _, weights = hub_environment.publish("small", tmp_path / "served")
    published_model_dir("small")
    damaged = bytearray(weights)
    damaged[-1] ^= 0xFF
    cached_weights(tmp_path).write_bytes(bytes(damaged))
    n_requests = len(hub_environment.requests)
    published_model_dir("small")
    assert len(hub_environment.requests) == n_requests + 1
    assert cached_weights(tmp_path).read_bytes() == weights


def test_a_cached_model_is_taken_without_its_lock_and_without_hashing_its_files(
    hub_environment, tmp_path, monkeypatch
):
    """Another process holds the model's lock (an install of it, say): a process that finds the
    model installed does not wait for it, and reads none of the downloaded files to hash them."""
    hub_environment.publish("small", tmp_path / "served")
    converted = published_model_dir("small")
    script = "from spacy_elmo.hub import published_model_dir; print(published_model_dir('small'))"
    with cache_lock(tmp_path / "cache", "small"):
        found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(converted)
    hashed = []
    monkeypatch.setattr(install, "file_sha256", lambda path: hashed.append(path) or file_sha256(path))
    assert published_model_dir("small") == converted and hashed == []
    weights = cached_weights(tmp_path)
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1))  # touched
    assert published_model_dir("small") == converted and weights in hashed  # checked under the lock
    hashed.clear()
    (converted / "model.safetensors").unlink()  # the model directory damaged: converted again
    assert published_model_dir("small") == converted and (converted / "model.safetensors").is_file()


def test_files_placed_by_hand_are_converted_without_the_network(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACY_ELMO_MIRROR", "http://127.0.0.1:9/")
    from ..bilm.random_weights import write_random_elmo

    options_file, weights_file = write_random_elmo(tmp_path / "by-hand")
    model = find_published_model("small")
    folder = tmp_path / "cache" / "small"
    folder.mkdir(parents=True)
    options_file.rename(folder / file_name(model.options_url))
    weights_file.rename(folder / file_name(model.weights_url))
    assert (published_model_dir("small") / "config.json").is_file()


def test_the_mirror_holds_allennlps_paths_at_its_root_and_other_hosts_under_their_name(monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_MIRROR", "https://models.example.org/elmo")
    small = find_published_model("small")
    assert mirrored(small.weights_url) == "https://models.example.org/elmo/" + small.weights_url.removeprefix(
        ALLENNLP_SERVER
    )
    assert (
        mirrored(find_published_model("ja").weights_url)
        == "https://models.example.org/elmo/exawizardsallenlp.blob.core.windows.net/data/weights.hdf5"
    )
    monkeypatch.delenv("SPACY_ELMO_MIRROR")
    assert mirrored(small.weights_url) == small.weights_url


def test_an_unknown_name_lists_the_known_names():
    with pytest.raises(UnknownModelError, match="Known names: small, medium, original, original-5.5b"):
        find_published_model("orginal")


@pytest.mark.skipif(sys.platform == "win32", reason="platformdirs asks Windows itself, not the environment")
def test_the_cache_defaults_to_the_platforms_user_cache(monkeypatch, tmp_path):
    from spacy_elmo.bilm.io.cache_home import cache_root

    monkeypatch.delenv("SPACY_ELMO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # read by platformdirs on Linux
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # where macOS has ~/Library/Caches
    expected = tmp_path / "home" / "Library" / "Caches" if sys.platform == "darwin" else tmp_path
    assert cache_root() == expected / "spacy-elmo"
