"""A corpus run on Ray as a guest in its user's program: Ray's loggers and the process's
warning filters are as the program set them once `run_corpus` returns. Each program runs in a
subprocess, as a user runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')
pytestmark = pytest.mark.slow  # every test starts a cluster: 10 to 60 s each
TIMEOUT_S = 300

USERS_PROGRAM = """
import logging, sys, warnings
import ray, ray.data
import spacy, torch  # libraries the program uses already: their own filters are set on import
import spacy_elmo.bilm.torch_probes
from spacy_elmo.corpus import run_corpus

logging.getLogger("ray.data").setLevel(logging.DEBUG)  # the user's own choices
warnings.filterwarnings("always", category=DeprecationWarning)

def state():
    levels = {name: logging.getLogger(name).level for name in ("", "ray", "ray.data", "ray.serve")}
    return levels, list(warnings.filters)

before = state()
run_corpus(sys.argv[1], sys.argv[2], model=sys.argv[3], engine="ray", workers=1)
after = state()
print("levels", before[0] == after[0], before[0], after[0])
print("filters", before[1] == after[1], [f for f in after[1] if f not in before[1]])
"""


def test_a_run_leaves_rays_loggers_and_the_warning_filters_as_it_found_them(bilm_path, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a small corpus\nof two rows\n", encoding="utf8")
    done = subprocess.run(
        [sys.executable, "-c", USERS_PROGRAM, str(corpus), str(tmp_path / "out"), str(bilm_path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    levels, filters = done.stdout.splitlines()
    assert levels.startswith("levels True") and filters.startswith("filters True"), done.stdout
