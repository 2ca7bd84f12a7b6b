"""The catalogue's models from other hosts and formats, through a local mirror: German (MD5 checked),
Basque, Tamil, the first Portuguese model, ELMoForManyLangs' simplified Chinese (.tar.bz2); the models
that cannot be loaded; and every name either installs or ends in one clear line."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import io
import tarfile

import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_elmo.bilm import BiLM
from spacy_elmo.cli import app
from spacy_elmo.hub import (
    PUBLISHED_MODELS,
    UNSUPPORTED_MODELS,
    HubError,
    UnknownModelError,
    find_published_model,
    published_model_dir,
)
from spacy_elmo.hub.catalog import MULTI_LANGUAGE, mirror_path, mirrored

from ..bilm.efml_models import write_random_efml
from .test_efml_install import model_members

SENTENCE = [["Die", "Bank", "hat", "天気", "ñu"]]
runner = CliRunner()


def md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


@pytest.mark.parametrize(
    ("name", "mirrored_weights"),
    [
        ("eu", "schweter.eu/cloud/eu-elmo/weights.hdf5"),
        ("ta", "schweter.eu/cloud/ta-elmo/weights.hdf5"),
        ("pt", "models/elmo/contributed/pt/elmo_pt_weights.hdf5"),
        (
            "de",
            "github.com/t-systems-on-site-services-gmbh/german-elmo-model/releases/download/files_1/weights.hdf5",
        ),
    ],
)
def test_a_contributed_model_installs_from_its_path_on_the_mirror(
    hub_environment, tmp_path, monkeypatch, name, mirrored_weights
):
    options, weights = hub_environment.publish(name, tmp_path / "served")
    if find_published_model(name).md5:  # the served files are not the published ones: their own MD5s
        monkeypatch.setitem(
            PUBLISHED_MODELS,
            name,
            dataclasses.replace(PUBLISHED_MODELS[name], md5=(md5(options), md5(weights))),
        )
    assert mirrored(find_published_model(name).weights_url) == hub_environment.root_url + mirrored_weights
    source = tmp_path / "served" / name
    expected = BiLM.from_allennlp(source / "options.json", source / "weights.hdf5").embed_sentences(SENTENCE)[
        0
    ]
    assert np.array_equal(BiLM.load(published_model_dir(name)).embed_sentences(SENTENCE)[0], expected)


def test_a_german_file_whose_md5_is_not_the_published_one_is_deleted_and_named(hub_environment, tmp_path):
    hub_environment.publish("de", tmp_path / "served")  # random files: not the published MD5s
    with pytest.raises(HubError, match="has the MD5 .*publishes da99676f2fe2838ff2663a6d9bad97dd") as error:
        published_model_dir("de")
    assert "german-elmo-model" in str(error.value)
    assert not (tmp_path / "cache" / "de" / "options.json").exists()
    assert not (tmp_path / "cache" / "de" / "model").exists()


def test_a_german_weights_file_whose_md5_is_not_the_published_one_is_deleted_and_named(
    hub_environment, tmp_path, monkeypatch
):
    options, _ = hub_environment.publish("de", tmp_path / "served")
    published = PUBLISHED_MODELS["de"]
    monkeypatch.setitem(
        PUBLISHED_MODELS, "de", dataclasses.replace(published, md5=(md5(options), published.md5[1]))
    )
    with pytest.raises(HubError, match="has the MD5 .*publishes f3ab3a68caae6d42bac47c230b3a65bf"):
        published_model_dir("de")
    assert not (tmp_path / "cache" / "de" / "weights.hdf5").exists()
    assert not (tmp_path / "cache" / "de" / "model").exists()


def test_the_simplified_chinese_tar_bz2_installs_like_the_package_files(hub_environment, tmp_path):
    source = write_random_efml(tmp_path / "served")
    hub_environment.publish_archive("efml-zhs", model_members(source, "zhs.model/"))
    model_dir = published_model_dir("efml-zhs")
    expected = BiLM.from_elmoformanylangs(source).embed_sentences(SENTENCE)[0]
    assert np.array_equal(BiLM.load(model_dir).embed_sentences(SENTENCE)[0], expected)
    assert sorted(path.name for path in model_dir.parent.iterdir()) == [
        "installed.json",
        "model",
        "zhs.model.tar.bz2",
    ]


@pytest.mark.parametrize("member", ["../outside.txt", "/etc/spacy-elmo-test", "zhs.model/../../outside.txt"])
def test_a_tar_member_that_would_leave_the_folder_rejects_the_archive(hub_environment, tmp_path, member):
    source = write_random_efml(tmp_path / "served")
    hub_environment.publish_archive("efml-zhs", {**model_members(source), member: b"not for you"})
    with pytest.raises(HubError, match="would be written outside the folder"):
        published_model_dir("efml-zhs")
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "cache" / "outside.txt").exists()
    assert sorted(path.name for path in (tmp_path / "cache" / "efml-zhs").iterdir()) == ["zhs.model.tar.bz2"]


def test_a_link_in_a_tar_archive_rejects_it(hub_environment, tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:bz2") as archive:
        link = tarfile.TarInfo("zhs.model/config.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    hub_environment.serve(find_published_model("efml-zhs").weights_url, buffer.getvalue())
    with pytest.raises(HubError, match="link or a special file"):
        published_model_dir("efml-zhs")


def test_a_model_that_cannot_be_loaded_is_listed_with_the_reason():
    result = runner.invoke(app, ["download", "--list"])
    assert result.exit_code == 0, result.output
    listing = result.output.split("Not supported")[1]
    for unsupported in UNSUPPORTED_MODELS.values():
        assert unsupported.url in listing and unsupported.reason in " ".join(listing.split())
    with pytest.raises(UnknownModelError, match="cannot be loaded by spacy-elmo: a transformer biLM"):
        find_published_model("transformer-elmo")


def test_every_entry_names_its_source_and_a_spacy_language_that_exists():
    for model in PUBLISHED_MODELS.values():
        assert model.source.startswith("https://"), model.name
        assert importlib.util.find_spec(f"spacy.lang.{model.spacy_lang}") is not None, model.name
    assert {name for name, model in PUBLISHED_MODELS.items() if model.spacy_lang == MULTI_LANGUAGE} == {
        "efml-cu",
        "efml-gl",
        "efml-ug",
    }


def test_every_name_without_its_files_ends_in_one_line_and_leaves_no_folder(hub_environment, tmp_path):
    for name in [*PUBLISHED_MODELS, *UNSUPPORTED_MODELS]:
        result = runner.invoke(app, ["download", name])
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert result.output.startswith("Error: ") and "Traceback" not in result.output, result.output
        assert not (tmp_path / "cache" / name).exists(), name


def test_a_file_url_mirror_serves_a_model_from_a_folder(tmp_path, monkeypatch):
    from ..bilm.random_weights import write_random_elmo

    model = find_published_model("eu")
    options_file, weights_file = write_random_elmo(tmp_path / "made")
    for url, made in zip(model.urls, (options_file, weights_file)):
        served = tmp_path / "mirror" / mirror_path(url)
        served.parent.mkdir(parents=True, exist_ok=True)
        made.rename(served)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACY_ELMO_MIRROR", (tmp_path / "mirror").as_uri())
    assert (published_model_dir("eu") / "model.safetensors").is_file()
