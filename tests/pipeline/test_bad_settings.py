"""Settings and weights `spacy train` cannot use, each refused as one error that spaCy's CLI shows
as `Error: ...` (a click exception) and that names the setting and the fix (issue #63)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import spacy

from spacy_elmo.pipeline.architectures import build_elmo_model_v1
from spacy_elmo.pipeline.component import Elmo
from spacy_elmo.pipeline.errors import CLIReportedError, ElmoPipelineError, ElmoWeightsError
from spacy_elmo.pipeline.loaders import configure_model_dir_loader

from .conftest import loader_config


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"mix_weights": [1e39, 0.0, 0.0]}, r"mix_weights = \[1e\+39, 0.0, 0.0\]: give non-negative weights"),
        ({"mix_weights": [math.inf, 0.0, 0.0]}, r"mix_weights = \[inf, 0.0, 0.0\]: give non-negative"),
        ({"mix_weights": [math.nan, 1.0, 1.0]}, r"mix_weights = \[nan, 1.0, 1.0\]: give non-negative"),
        ({"mix_gamma": math.inf}, r"mix_gamma = inf: give a finite scale"),
        ({"mix_gamma": -1e39}, r"mix_gamma = -1e\+39: give a finite scale"),
        ({"precision": "fp8"}, r"precision = 'fp8'"),
    ],
)
def test_a_bad_setting_is_refused_at_construction_as_a_cli_message(settings: dict, message: str) -> None:
    """Infinity and NaN reach the component from Python (spaCy's add_pipe refuses them in a config)."""
    with pytest.raises(ElmoPipelineError, match=message) as error:
        Elmo(spacy.blank("en").vocab, build_elmo_model_v1(), **settings)
    assert isinstance(error.value, CLIReportedError)


def test_a_bad_max_length_is_refused_as_a_cli_message() -> None:
    model = {"@architectures": "spacy-elmo.ElmoModel.v1", "max_length": -3}
    with pytest.raises(
        ElmoPipelineError, match=r"max_length \(-3\) .* of \[components.elmo.model\]"
    ) as error:
        spacy.blank("en").add_pipe("elmo", config={"model": model})
    assert isinstance(error.value, CLIReportedError)


def test_weights_too_large_to_add_in_float32_still_mix_exactly(bilm_dir: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"mix_weights": [3e38, 3e38, 0.0]})
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_dir)
    nlp.initialize()
    doc = nlp("river bank")
    expected = 0.5 * doc._.elmo.layers[0] + 0.5 * doc._.elmo.layers[1]
    np.testing.assert_allclose(np.stack([token._.elmo for token in doc]), expected, rtol=1e-6, atol=1e-7)


@pytest.fixture()
def weights(bilm_dir: Path, tmp_path: Path) -> dict[str, Path]:
    """A zero-byte file, a model directory with zero-byte weights and a spaCy pipeline folder."""
    (tmp_path / "empty.safetensors").write_bytes(b"")
    shutil.copytree(bilm_dir, tmp_path / "empty_weights")
    (tmp_path / "empty_weights" / "model.safetensors").write_bytes(b"")
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_dir)
    nlp.initialize()
    nlp.to_disk(tmp_path / "pipeline")
    return {name: tmp_path / name for name in ("empty.safetensors", "empty_weights", "pipeline")}


@pytest.mark.parametrize(
    "name, message",
    [
        ("empty.safetensors", "empty.safetensors is a file, not a model directory"),
        ("empty_weights", "model.safetensors is not a readable safetensors file"),
        ("pipeline", "pipeline is a spaCy pipeline, not a biLM"),
    ],
)
def test_weights_the_loader_cannot_read_name_the_loader_and_the_fix(
    weights: dict[str, Path], name: str, message: str
) -> None:
    with pytest.raises(ElmoWeightsError, match=message) as error:
        configure_model_dir_loader(str(weights[name]))()
    assert str(error.value).startswith("[initialize.components.elmo.loader] path")
    assert "--paths.elmo" in str(error.value)
