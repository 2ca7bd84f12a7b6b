"""Reproducible runs (docs/bilm.md, "What is equal, and to what"): with `SPACY_ELMO_THREADS=fixed`
two `nlp.pipe` calls on the same texts give vectors equal bit for bit. Run as a user's program:
a fresh interpreter at torch's default thread count, with a timeout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ..bilm.test_thread_policy import user_environment
from ..numerics import assert_bit_equal

pytestmark = [pytest.mark.slow, pytest.mark.numerics]

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import spacy

    texts = ["The bank raised rates near the river bank.", "Ok", "She sat on the bank."] * 12
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    first, second = ([doc._.elmo.layers for doc in nlp.pipe(texts, batch_size=8)] for _ in range(2))
    np.savez(sys.argv[1], *first, *second)
    """
)


def test_two_calls_with_a_fixed_thread_count_are_equal_bit_for_bit(tmp_path: Path) -> None:
    path = tmp_path / "layers.npz"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=user_environment({"SPACY_ELMO_THREADS": "fixed"}),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    arrays = list(np.load(path).values())
    first, second = arrays[: len(arrays) // 2], arrays[len(arrays) // 2 :]
    assert len(first) == 36
    for one, other in zip(first, second, strict=True):
        assert_bit_equal(one, other)
