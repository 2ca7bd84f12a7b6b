"""Published biLMs in spaCy configs: `spacy-elmo.Published.v1` and a name given to `ModelDir.v1`."""

from __future__ import annotations

import pytest
import torch
from spacy.cli._util import parse_config_overrides
from spacy.util import load_config, registry

from spacy_elmo.bilm import BiLM
from spacy_elmo.hub import AmbiguousNameWarning, UnknownModelError
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


def test_a_bare_name_beside_a_folder_of_that_name_is_the_published_model_with_a_warning(
    hub_environment, tmp_path, monkeypatch
):
    from .conftest import tiny_bilm

    hub_environment.publish("small", tmp_path / "served")
    tiny_bilm(seed=2).save(tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    with pytest.warns(AmbiguousNameWarning, match="using the published biLM.*Write ./small"):
        configure_model_dir_loader("small")()
    assert len(hub_environment.requests) == 2
    folder = configure_model_dir_loader("./small")()
    assert len(hub_environment.requests) == 2
    assert torch.equal(
        folder.state_dict()["token_encoder.char_embedding"],
        tiny_bilm(seed=2).state_dict()["token_encoder.char_embedding"],
    )


def test_a_missing_path_that_is_no_published_name_lists_the_names(tmp_path):
    with pytest.raises(
        ElmoPipelineError, match="does not exist, and it is not the name of a biLM.*download --list"
    ):
        configure_model_dir_loader(str(tmp_path / "nope"))()
