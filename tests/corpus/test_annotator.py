"""`Annotator.from_model` reads a biLM by any name `spacy-elmo embed` takes (no Ray needed)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from spacy_elmo.bilm.io.model_dir import WEIGHTS_FILE
from spacy_elmo.bundled import BUNDLED_NAME, BUNDLED_PATH
from spacy_elmo.corpus.annotator import Annotator
from spacy_elmo.corpus.ray.shipping import bilm_bundle
from spacy_elmo.hub.names import AmbiguousNameWarning

ROWS = ["Alice moved to Berlin .", "Ok"]


def test_the_bundled_biLM_by_name_gives_its_directorys_vectors() -> None:
    by_name = Annotator.from_model(BUNDLED_NAME).annotate("text", ROWS, None)
    by_path = Annotator.from_model(BUNDLED_PATH).annotate("text", ROWS, None)
    assert by_name["tokens"] == [row.split() for row in ROWS]
    for got, want in zip(by_name["vectors"], by_path["vectors"]):
        np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_a_run_ships_the_biLM_a_name_means_even_beside_a_folder_of_that_name(tmp_path, monkeypatch) -> None:
    """The command's process resolves the name once (workers get its files, never the name)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / BUNDLED_NAME).mkdir()  # a folder that shadows the name: the name still wins
    with pytest.warns(AmbiguousNameWarning):
        bundle = bilm_bundle(BUNDLED_NAME, None)
    weights = (BUNDLED_PATH / WEIGHTS_FILE).read_bytes()
    assert bundle.files[WEIGHTS_FILE] == weights
    assert bundle.sha256 == hashlib.sha256(weights).hexdigest()
    with bundle.unpacked() as folder:
        shipped = Annotator.from_model(folder).annotate("text", ROWS, None)
    for got, want in zip(
        shipped["vectors"], Annotator.from_model(BUNDLED_PATH).annotate("text", ROWS, None)["vectors"]
    ):
        np.testing.assert_allclose(got, want, atol=0, rtol=0)
    assert not folder.exists()  # unpacked for loading only
