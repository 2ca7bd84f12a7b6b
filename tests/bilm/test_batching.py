"""The one token-budget batcher gives exactly the batches of the three batchers it replaces."""

from __future__ import annotations

import random

import numpy as np
import pytest

from spacy_elmo.bilm.batching import budget_batches
from spacy_elmo.bilm.model import _batches
from spacy_elmo.pipeline.layers import Segment, batches
from spacy_elmo.training.evaluate import _length_batches


def random_lengths(seed: int) -> list[int]:
    generator = random.Random(seed)
    return [generator.choice([0, 1, 2, 3, 5, 8, 13, 40]) for _ in range(generator.randint(0, 60))]


@pytest.mark.parametrize("seed", range(200))
def test_same_batches_as_the_old_batchers(seed: int) -> None:
    lengths = random_lengths(seed)
    generator = random.Random(-seed)
    budget, rows = generator.randint(1, 120), generator.randint(1, 12)
    for stateful in (False, True):
        for max_tokens in (None, budget):
            indices = list(range(len(lengths)))
            if not stateful:
                indices.sort(key=lambda index: lengths[index], reverse=True)
            padded = [length + 2 for length in lengths]
            old = list(_batches(indices, padded, rows, max_tokens))
            order = "as_given" if stateful else "longest_first"
            assert budget_batches(padded, max_tokens, max_rows=rows, order=order) == old
    segments = [Segment(index, np.zeros(length, dtype=np.int64)) for index, length in enumerate(lengths)]
    old_segments = [[segment.doc_index for segment in batch] for batch in batches(segments, budget)]
    assert budget_batches(lengths, budget) == old_segments
    sentences = [["w"] * length for length in lengths]
    position = {id(sentence): index for index, sentence in enumerate(sentences)}
    old_sentences = [
        [position[id(sentence)] for sentence in batch] for batch in _length_batches(sentences, budget)
    ]
    new_sentences = budget_batches([length + 1 for length in lengths], budget, order="shortest_first")
    assert new_sentences == old_sentences
