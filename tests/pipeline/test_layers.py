"""The batching of doc segments into biLM batches."""

from __future__ import annotations

import numpy as np

from spacy_elmo.pipeline.layers import Segment, batches


def test_batches_respect_the_padded_token_budget() -> None:
    segments = [Segment(0, np.arange(length)) for length in (5, 1, 9, 3, 3, 7)]
    produced = list(batches(segments, max_batch_tokens=12))
    assert sorted(len(s.token_indices) for batch in produced for s in batch) == [1, 3, 3, 5, 7, 9]
    for batch in produced:
        assert len(batch) == 1 or len(batch) * max(len(s.token_indices) for s in batch) <= 12
