"""The numerics tests (marker `numerics`) a second time, under another kernel choice: the generic
ATen kernels instead of this CPU's vector ones, no weight copies, one thread. A test that holds
only for the kernels of the machine it was written on fails here, on any machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import REPO_ROOT

ANOTHER_KERNEL_CHOICE = {
    "ATEN_CPU_CAPABILITY": "default",
    "SPACY_ELMO_WEIGHT_COPIES": "off",
    "SPACY_ELMO_THREADS": "fixed",
    "OMP_NUM_THREADS": "1",  # one thread: the first pass runs at torch's default count
}
NUMERICS_FILES = (
    "tests/test_numerics.py",
    "tests/bilm/test_fast_paths.py",
    "tests/bilm/test_model.py",
    "tests/bilm/test_tf_fixture.py",
)
TIMEOUT_S = 300


@pytest.mark.slow
def test_the_numerics_tests_pass_under_another_kernel_choice() -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "numerics"]
    try:
        done = subprocess.run(
            [*command, *NUMERICS_FILES],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**os.environ, **ANOTHER_KERNEL_CHOICE},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the second numerics pass did not finish in {TIMEOUT_S} s")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
