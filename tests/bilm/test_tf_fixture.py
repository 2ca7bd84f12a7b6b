"""The TensorFlow ground truth of bilm-tf's test fixture, reproduced to 1e-5 (see its README)."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, batch_to_ids

pytestmark = pytest.mark.numerics

ATOL = 1e-5


@pytest.fixture(scope="module")
def fixture(shared_data):
    directory = shared_data / "bilm-tf-fixture"
    sentences = json.loads((directory / "lm_embeddings_sentences.json").read_text())
    expected = []
    for k in range(3):
        with h5py.File(directory / f"lm_embeddings_{k}.hdf5", "r") as handle:
            expected.append([handle[str(i)][...] for i in range(10)])
    return directory, sentences, expected


def top_layer_by_direction(layers: torch.Tensor, row: int, n_tokens: int) -> np.ndarray:
    """(L + 1, B, T, 2P) -> (2, n, P): the fixture's [forward, backward] top layer of one row."""
    top = layers[-1, row, :n_tokens].numpy()
    return np.stack(np.split(top, 2, axis=-1))


def test_stateful_batches_reproduce_tensorflow_for_every_sentence(fixture):
    directory, sentences, expected = fixture
    bilm = BiLM.from_allennlp(directory / "options.json", directory / "lm_weights.hdf5", stateful=True)
    assert not bilm.config.use_skip_connections
    for batch_index in range(10):
        batch = [sentences[k][batch_index].split() for k in range(3)]
        with torch.no_grad():
            layers, mask = bilm(batch_to_ids(batch))
        for row, tokens in enumerate(batch):
            want = expected[row][batch_index]
            assert want.shape == (2, len(tokens), 16)
            got = top_layer_by_direction(layers, row, len(tokens))
            np.testing.assert_allclose(got, want, atol=ATOL, rtol=0, err_msg=f"batch {batch_index} row {row}")


def test_stateless_model_matches_tensorflow_only_on_the_first_batch(fixture):
    directory, sentences, expected = fixture
    bilm = BiLM.from_allennlp(directory / "options.json", directory / "lm_weights.hdf5")
    outputs = [bilm.embed_sentences([sentences[k][i].split() for k in range(3)]) for i in range(2)]
    np.testing.assert_allclose(
        np.stack(np.split(outputs[0][0][-1], 2, -1)), expected[0][0], atol=ATOL, rtol=0
    )
    second = np.stack(np.split(outputs[1][0][-1], 2, -1))
    assert np.abs(second - expected[0][1]).max() > 1e-3  # TF carried states: stateless differs
