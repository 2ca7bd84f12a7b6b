"""The numerics contract of docs/bilm.md ("What is equal, and to what"), as two assertions.

- `assert_bit_equal`: only where the contract promises equality bit for bit (the same batch at
  the same thread count in one process; export then import; saved then loaded weights).
- `assert_within_tolerance`: everywhere else that float32 vectors are compared (another batch
  composition or row count, thread count, process, engine or CPU), to the contract's figures.

Ids, tokens and counts are not float numerics: compare them with `==`.
"""

from __future__ import annotations

import numpy as np
import torch

RTOL = 1e-5
"""Relative part of the contract's tolerance: |actual - expected| <= ATOL + RTOL * |expected|."""
ATOL = 2e-5
"""Absolute part of the contract's tolerance (the largest difference measured was 3.8e-6)."""

Vectors = np.ndarray | torch.Tensor


def as_array(vectors: Vectors) -> np.ndarray:
    """A numpy view of `vectors` (a CPU copy of a tensor), to compare arrays and tensors alike."""
    return vectors.detach().cpu().numpy() if isinstance(vectors, torch.Tensor) else np.asarray(vectors)


def assert_bit_equal(actual: Vectors, expected: Vectors) -> None:
    """Equal bit for bit, shape and dtype included: where the contract promises it."""
    actual_array, expected_array = as_array(actual), as_array(expected)
    assert actual_array.dtype == expected_array.dtype, f"dtype {actual_array.dtype} != {expected_array.dtype}"
    np.testing.assert_array_equal(actual_array, expected_array, strict=True)


def assert_within_tolerance(actual: Vectors, expected: Vectors) -> None:
    """Equal to the contract's tolerance (`ATOL` + `RTOL` * |expected|), shapes equal."""
    actual_array, expected_array = as_array(actual), as_array(expected)
    assert actual_array.shape == expected_array.shape, f"shape {actual_array.shape} != {expected_array.shape}"
    np.testing.assert_allclose(actual_array, expected_array, rtol=RTOL, atol=ATOL)
