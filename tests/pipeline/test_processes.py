"""Processes and threads as users run them: a fresh interpreter with torch's default thread
count (not the suite's one-thread pin), the bundled biLM, and a timeout, since the bugs these
guard against are hangs.

`nlp.pipe(n_process=2)` hung once the parent had run the biLM: the forked children inherited the
parent's OpenMP pool without its threads. Each script exits 0 and prints the largest difference
between the multi-process (or multi-thread) vectors and the sequential ones.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TIMEOUT_S = 240

SCRIPT_HEADER = """
import multiprocessing, sys
import numpy as np
import spacy, torch

START_THREADS = torch.get_num_threads()  # before the thread policy adapts it to the machine

TEXTS = [
    "The bank raised rates near the river bank.",
    "She sat on the bank and watched the water.",
    "Apple is looking at buying a U.K. startup for $1 billion.",
    "",
    "Ok",
] * 8


def max_difference(first, second):
    return max(
        float(np.abs(a._.elmo.layers - b._.elmo.layers).max(initial=0.0)) for a, b in zip(first, second)
    )
"""

PROCESSES_SCRIPT = (
    SCRIPT_HEADER
    + """
if __name__ == "__main__":
    start_method, warm = sys.argv[1], sys.argv[2] == "warm"
    if start_method != "default":
        multiprocessing.set_start_method(start_method)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    if warm:
        sequential = list(nlp.pipe(TEXTS))  # the use that left a live OpenMP pool behind
    parallel = list(nlp.pipe(TEXTS, n_process=2, batch_size=4))
    if not warm:
        sequential = list(nlp.pipe(TEXTS))
    print(START_THREADS, max_difference(sequential, parallel))
"""
)

THREADS_SCRIPT = (
    SCRIPT_HEADER
    + """
from concurrent.futures import ThreadPoolExecutor

if __name__ == "__main__":
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    sequential = [nlp(text) for text in TEXTS]
    with ThreadPoolExecutor(max_workers=8) as pool:  # a web server's worker threads
        concurrent = list(pool.map(nlp, TEXTS * 3))
    print(START_THREADS, max_difference(sequential * 3, concurrent))
"""
)


def environment_without_thread_settings() -> dict[str, str]:
    """The environment less every thread setting: torch's, OpenMP's and the thread policy's."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.endswith("_NUM_THREADS") and name != "SPACY_ELMO_THREADS"
    }


def run_as_a_user(script: str, tmp_path: Path, *args: str) -> tuple[int, float]:
    """Run `script` in a new interpreter with no thread settings inherited; return (torch's thread
    count there at the start, the largest difference it printed)."""
    path = tmp_path / "script.py"
    path.write_text(script, encoding="utf8")
    try:
        done = subprocess.run(
            [sys.executable, str(path), *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=environment_without_thread_settings(),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args) or 'the script'} did not finish in {TIMEOUT_S} s: a hang")
    assert done.returncode == 0, done.stderr[-3000:]
    threads, difference = done.stdout.split()[-2:]
    return int(threads), float(difference)


@pytest.mark.parametrize("start_method", ["default", "spawn"])
@pytest.mark.parametrize("warm", ["warm", "cold"])
def test_two_processes_give_the_sequential_vectors(tmp_path: Path, start_method: str, warm: str) -> None:
    threads, difference = run_as_a_user(PROCESSES_SCRIPT, tmp_path, start_method, warm)
    assert threads == torch_default_threads()  # the parent ran as a user's does, not pinned
    assert difference <= 1e-5  # the children may run on fewer threads: float32 rounding only


def test_eight_serving_threads_give_the_sequential_vectors(tmp_path: Path) -> None:
    threads, difference = run_as_a_user(THREADS_SCRIPT, tmp_path)
    assert threads == torch_default_threads()
    assert difference <= 1e-5


@functools.cache
def torch_default_threads() -> int:
    """What torch picks with no settings: the number of physical cores, at least 1 (asked once)."""
    done = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment_without_thread_settings(),
    )
    return int(done.stdout)
