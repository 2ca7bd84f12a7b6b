"""ELMoForManyLangs models by name: the archive downloaded, extracted safely, converted once."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo.bilm import BiLM
from spacy_elmo.hub import HubError, find_published_model, published_model_dir
from spacy_elmo.hub.archive import extract_zip
from spacy_elmo.hub.catalog import NLPL_SERVER, PUBLISHED_MODELS, mirrored
from spacy_elmo.pipeline.loaders import configure_published_loader

from ..bilm.efml_models import write_random_efml

SENTENCE = [["Die", "Bank", "hat", "天気", "ñu"]]


def model_members(source: Path, folder: str = "") -> dict[str, bytes]:
    return {f"{folder}{path.name}": path.read_bytes() for path in sorted(source.iterdir())}


@pytest.mark.parametrize("folder", ["", "142/"], ids=["files-at-the-root", "files-in-a-folder"])
def test_an_efml_name_is_downloaded_extracted_converted_and_loads_like_the_package_files(
    hub_environment, tmp_path, folder
):
    source = write_random_efml(tmp_path / "served")
    hub_environment.publish_archive("efml-de", model_members(source, folder))
    model_dir = published_model_dir("efml-de")
    assert model_dir == tmp_path / "cache" / "efml-de" / "model"
    expected = BiLM.from_elmoformanylangs(source).embed_sentences(SENTENCE)[0]
    assert np.array_equal(BiLM.load(model_dir).embed_sentences(SENTENCE)[0], expected)
    assert sorted(path.name for path in (tmp_path / "cache" / "efml-de").iterdir()) == [
        "142.zip",
        "installed.json",
        "model",
    ]
    hub_environment.files.clear()
    assert published_model_dir("efml-de") == model_dir  # from the cache, no request
    assert len(hub_environment.requests) == 1


def test_the_published_loader_gives_the_lexicon_model(hub_environment, tmp_path):
    hub_environment.publish_archive("efml-zh", model_members(write_random_efml(tmp_path / "served")))
    bilm = configure_published_loader("efml-zh")()
    assert bilm.lexicon is not None and bilm.config.word_dim == 5


@pytest.mark.parametrize(
    "member",
    [
        "../outside.txt",
        "/etc/spacy-elmo-test",
        "model/../../outside.txt",
        "C:/windows.txt",
        "..\\outside.txt",
    ],
)
def test_an_archive_member_that_would_leave_the_folder_rejects_the_archive(hub_environment, tmp_path, member):
    source = write_random_efml(tmp_path / "served")
    hub_environment.publish_archive("efml-de", {**model_members(source), member: b"not for you"})
    with pytest.raises(HubError, match="would be written outside the folder"):
        published_model_dir("efml-de")
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "cache" / "outside.txt").exists()
    assert not (tmp_path / "cache" / "efml-de" / "model").exists()
    assert sorted(path.name for path in (tmp_path / "cache" / "efml-de").iterdir()) == ["142.zip"]


def test_a_link_in_an_archive_rejects_it(tmp_path):
    archive = tmp_path / "links.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        link = zipfile.ZipInfo("config.json")
        link.external_attr = (0o120777 << 16) | 0  # a symbolic link
        handle.writestr(link, "/etc/passwd")
    with pytest.raises(HubError, match="link or a special file"):
        extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_damaged_archive_says_to_download_it_again(hub_environment, tmp_path):
    hub_environment.files["/repository/11/142.zip"] = b"PK\x03\x04 not really a zip"
    with pytest.raises(HubError, match="not a readable zip archive.*download it afresh"):
        published_model_dir("efml-de")


def test_an_archive_without_a_model_is_named(hub_environment, tmp_path):
    hub_environment.publish_archive("efml-de", {"README": b"nothing here"})
    with pytest.raises(HubError, match="holds no ELMoForManyLangs model"):
        published_model_dir("efml-de")


def test_a_missing_archive_says_how_to_place_it_by_hand(hub_environment, tmp_path):
    with pytest.raises(HubError) as error:
        published_model_dir("efml-de")
    message = str(error.value)
    assert "HTTP 404" in message and "142.zip" in message and "spacy-elmo convert MODEL_DIR DIR" in message


def test_every_language_of_the_readme_has_a_name_and_an_nlpl_archive(monkeypatch):
    efml = {
        name: model for name, model in PUBLISHED_MODELS.items() if model.weights_url.startswith(NLPL_SERVER)
    }
    assert len(efml) == 44
    ids = sorted(
        int(model.weights_url.removeprefix(f"{NLPL_SERVER}repository/11/").removesuffix(".zip"))
        for model in efml.values()
    )
    assert ids == list(range(136, 180))
    assert find_published_model("efml-de").language.startswith("German")
    monkeypatch.setenv("SPACY_ELMO_MIRROR", "https://mirror.example.org/nlpl/")
    assert (
        mirrored(find_published_model("efml-de").weights_url)
        == "https://mirror.example.org/nlpl/repository/11/142.zip"
    )


def test_a_member_that_cannot_be_read_names_the_archive(tmp_path):
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("model/config.json", b"{}" * 100)
    data = bytearray(archive.read_bytes())
    data[data.index(b"config.json") + len("config.json") + 10] ^= 0xFF  # inside the member's bytes
    archive.write_bytes(bytes(data))
    with pytest.raises(HubError, match=r"model.zip: a member cannot be read \(Bad CRC-32.*afresh"):
        extract_zip(archive, tmp_path / "out")
