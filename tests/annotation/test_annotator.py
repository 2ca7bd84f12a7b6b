"""`Annotator.from_model` reads a biLM by any name `spacy-elmo embed` takes (no Ray needed)."""

from __future__ import annotations

import numpy as np
import pytest

from spacy_elmo.annotation.annotator import Annotator
from spacy_elmo.bundled import BUNDLED_NAME, BUNDLED_PATH
from spacy_elmo.cli.ray_engine import worker_model
from spacy_elmo.hub.names import AmbiguousNameWarning

ROWS = ["Alice moved to Berlin .", "Ok"]


def test_the_bundled_biLM_by_name_gives_its_directorys_vectors() -> None:
    by_name = Annotator.from_model(BUNDLED_NAME).annotate("text", ROWS, None)
    by_path = Annotator.from_model(BUNDLED_PATH).annotate("text", ROWS, None)
    assert by_name["tokens"] == [row.split() for row in ROWS]
    for got, want in zip(by_name["vectors"], by_path["vectors"]):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_workers_get_a_name_as_a_name_and_a_path_made_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    assert worker_model("mine") == str(tmp_path / "mine")
    assert worker_model("./mine") == str(tmp_path / "mine")
    (tmp_path / BUNDLED_NAME).mkdir()  # a folder that shadows the name: the name still wins
    with pytest.warns(AmbiguousNameWarning):
        assert worker_model(BUNDLED_NAME) == BUNDLED_NAME
