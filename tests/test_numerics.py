"""The numerics helper holds the contract of docs/bilm.md: it fails on a difference larger than
the tolerance, its bit-equal assertion fails on one ulp, and the page states its figures."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from .conftest import REPO_ROOT
from .numerics import ATOL, RTOL, assert_bit_equal, assert_within_tolerance

pytestmark = pytest.mark.numerics

EXPECTED = np.array([[0.0, 1e-3, -0.5], [5.3, -4.3, 2.0]], dtype=np.float32)


def test_a_difference_within_the_tolerance_passes() -> None:
    assert_within_tolerance(EXPECTED + np.float32(0.9 * ATOL), EXPECTED)
    assert_within_tolerance(torch.from_numpy(EXPECTED * np.float32(1 + 0.9 * RTOL)), EXPECTED)


@pytest.mark.parametrize("position", [(0, 0), (1, 0)], ids=["zero", "largest"])
def test_a_difference_over_the_tolerance_fails(position: tuple[int, int]) -> None:
    actual = EXPECTED.copy()
    actual[position] += 2 * (ATOL + RTOL * abs(EXPECTED[position]))
    with pytest.raises(AssertionError):
        assert_within_tolerance(actual, EXPECTED)


def test_one_ulp_fails_the_bit_equal_assertion_but_not_the_tolerance() -> None:
    actual = EXPECTED.copy()
    actual[1, 0] = np.nextafter(actual[1, 0], np.float32(np.inf))
    with pytest.raises(AssertionError):
        assert_bit_equal(actual, EXPECTED)
    assert_within_tolerance(actual, EXPECTED)
    assert_bit_equal(torch.from_numpy(EXPECTED.copy()), EXPECTED)


def test_another_shape_or_dtype_fails_both() -> None:
    with pytest.raises(AssertionError):
        assert_within_tolerance(EXPECTED[:1], EXPECTED)
    with pytest.raises(AssertionError):
        assert_bit_equal(EXPECTED.astype(np.float64), EXPECTED)


def test_the_contract_page_states_the_helpers_figures() -> None:
    page = (REPO_ROOT / "docs" / "bilm.md").read_text(encoding="utf8")
    stated = re.search(r"`\|actual - expected\| <= ([0-9.e-]+) \+ ([0-9.e-]+) \* \|expected\|`", page)
    assert stated is not None, "docs/bilm.md no longer states the tolerance"
    assert (float(stated[1]), float(stated[2])) == (ATOL, RTOL)
