"""Published biLMs in spaCy configs: `spacy-elmo.Published.v1` and a name given to `ModelDir.v1`."""

from __future__ import annotations

import pytest
from spacy.cli._util import parse_config_overrides
from spacy.util import load_config, registry

from spacy_elmo.bilm import BiLM
from spacy_elmo.hub import UnknownModelError
from spacy_elmo.pipeline.errors import ElmoPipelineError
from spacy_elmo.pipeline.loaders import configure_model_dir_loader
from tests.conftest import REPO_ROOT


def resolve_loader(section: dict) -> BiLM:
    return registry.resolve({"loader": section})["loader"]()


def test_the_published_loader_downloads_by_name(hub_environment, tmp_path):
    hub_environment.publish("medium", tmp_path / "served")
    bilm = resolve_loader({"@misc": "spacy-elmo.Published.v1", "name": "medium"})
    assert bilm.config.projection_dim == 8  # the tiny weights served under medium's paths


def test_the_published_loader_rejects_an_unknown_name_when_the_config_is_resolved():
    with pytest.raises(UnknownModelError, match="Known names"):
        registry.resolve({"loader": {"@misc": "spacy-elmo.Published.v1", "name": "nope"}})


def test_paths_elmo_takes_a_published_name_in_the_shipped_configs(hub_environment, tmp_path):
    hub_environment.publish("original", tmp_path / "served")
    overrides = parse_config_overrides(["--paths.elmo", "original"])
    config = load_config(REPO_ROOT / "configs" / "ner_elmo.cfg", overrides=overrides, interpolate=True)
    assert isinstance(resolve_loader(config["initialize"]["components"]["elmo"]["loader"]), BiLM)


def test_a_directory_named_like_a_published_model_wins(hub_environment, tmp_path, monkeypatch):
    from .conftest import tiny_bilm

    tiny_bilm(seed=2).save(tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    assert isinstance(configure_model_dir_loader("small")(), BiLM)
    assert hub_environment.requests == []


def test_a_missing_path_that_is_no_published_name_lists_the_names(tmp_path):
    with pytest.raises(ElmoPipelineError, match="does not exist, and it is not the name.*original"):
        configure_model_dir_loader(str(tmp_path / "nope"))()
