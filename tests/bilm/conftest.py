from __future__ import annotations

import pytest

from spacy_elmo.bilm import BiLM

from .random_weights import write_random_elmo
from .reference import NumpyELMo


@pytest.fixture(scope="session")
def random_elmo_files(tmp_path_factory):
    """(options.json, weights.hdf5) of a tiny random biLM with residuals and active clipping."""
    return write_random_elmo(tmp_path_factory.mktemp("random_elmo"))


@pytest.fixture(scope="session")
def reference(random_elmo_files) -> NumpyELMo:
    return NumpyELMo(*random_elmo_files)


@pytest.fixture()
def bilm(random_elmo_files) -> BiLM:
    return BiLM.from_allennlp(*random_elmo_files)
