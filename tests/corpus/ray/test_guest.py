"""A corpus run on Ray as a guest in its user's program and machine: Ray's loggers and the
process's warning filters are as the program set them once `run_corpus` returns; a command stopped
by SIGTERM says what it kept, and leaves no cluster and no session folder behind. Each program
runs in a subprocess, as a user runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ...waiting import wait_for

pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')
pytestmark = pytest.mark.slow  # every test starts a cluster: 10 to 60 s each
TIMEOUT_S = 300

USERS_PROGRAM = """
import logging, signal, sys, warnings
import ray, ray.data
import spacy, torch  # libraries the program uses already: their own filters are set on import
import spacy_elmo.bilm.torch_probes
from spacy_elmo.corpus import run_corpus

logging.getLogger("ray.data").setLevel(logging.DEBUG)  # the user's own choices
warnings.filterwarnings("always", category=DeprecationWarning)
signal.signal(signal.SIGTERM, lambda number, frame: print("the program's own SIGTERM handler"))

def state():
    levels = {name: logging.getLogger(name).level for name in ("", "ray", "ray.data", "ray.serve")}
    return levels, list(warnings.filters), signal.getsignal(signal.SIGTERM)

before = state()
run_corpus(sys.argv[1], sys.argv[2], model=sys.argv[3], engine="ray", workers=1)
after = state()
print("levels", before[0] == after[0], before[0], after[0])
print("filters", before[1] == after[1], [f for f in after[1] if f not in before[1]])
print("SIGTERM handler", before[2] == after[2])
"""


def test_a_run_leaves_rays_loggers_the_warning_filters_and_sigterm_as_it_found_them(bilm_path, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a small corpus\nof two rows\n", encoding="utf8")
    done = subprocess.run(
        [sys.executable, "-c", USERS_PROGRAM, str(corpus), str(tmp_path / "out"), str(bilm_path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    levels, filters, handler = done.stdout.splitlines()
    assert levels.startswith("levels True") and filters.startswith("filters True"), done.stdout
    assert handler == "SIGTERM handler True"  # ray.init sets its own: the program's is set back


def command(*arguments: object) -> list[str]:
    return [sys.executable, "-m", "spacy_elmo", *map(str, arguments)]


def processes_mentioning(text: str) -> list[int]:
    """The ids of the processes whose command line mentions `text`."""
    found = []
    for process in Path("/proc").iterdir():
        try:
            if process.name.isdigit() and text.encode() in (process / "cmdline").read_bytes():
                found.append(int(process.name))
        except OSError:  # ended while listed
            pass
    return found


def one_worker_two_rows_a_file(model: Path, corpus: Path, output: Path) -> list:
    """`embed` on Ray, one worker writing files of two rows: a run long enough to be stopped."""
    return ["embed", model, corpus, output, "--engine", "ray", "--workers", "1", "--rows-per-file", "2"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stopped_ray_run_says_what_it_kept_and_leaves_no_cluster(ray_cluster, bilm_path, tmp_path, stop):
    """The command starts its own local cluster; SIGTERM (or Ctrl-C's SIGINT) once parts are
    written: one line saying what was kept and how to go on, exit status 128 + the signal, no Ray
    process or session folder of the command left; --resume then finishes the run."""
    corpus, output = tmp_path / "corpus.txt", tmp_path / "out"
    corpus.write_text("".join(f"row {number} of a corpus\n" for number in range(3000)), encoding="utf8")
    arguments = one_worker_two_rows_a_file(bilm_path, corpus, output)
    process = subprocess.Popen(command(*arguments), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(
            lambda: list((tmp_path / ".out.spacy-elmo-run" / "parts").glob("part-*")), "a part", TIMEOUT_S
        )
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=TIMEOUT_S)
    finally:
        process.kill()
    assert process.returncode == 128 + stop, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: Stopped by {stop.name}: the "), stderr
    assert lines[0].endswith(
        "parts written so far are kept: run the same command with --resume to go on from "
        "them, or --force to start over."
    )
    sessions = list((Path(tempfile.gettempdir()) / "ray").glob(f"session_*_{process.pid}"))
    assert sessions == [] and processes_mentioning(f"_{process.pid}/") == []

    resumed = subprocess.run(
        command(*arguments, "--resume", "--address", ray_cluster),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert resumed.returncode == 0 and resumed.stdout.startswith("Wrote 3,000 rows"), resumed.stderr


RESUMED_OTHERWISE = """
import sys
import ray
from spacy_elmo.corpus import run_corpus

corpus, output, model = sys.argv[1:4]
try:
    run_corpus(corpus, output, model=model, engine="ray", rows_per_file=2, layers="all", resume=True)
except Exception as error:
    print(type(error).__name__, str(error))
print("ray started:", ray.is_initialized())
"""


def test_a_resume_with_other_settings_is_refused_before_a_cluster_starts(ray_cluster, bilm_path, tmp_path):
    """Starting a cluster takes seconds: the run record is read first."""
    from .test_scale import corpus_file, killed_run

    corpus, output = corpus_file(tmp_path), tmp_path / "out"
    arguments = one_worker_two_rows_a_file(bilm_path, corpus, output)
    killed_run(arguments, ray_cluster, tmp_path / ".out.spacy-elmo-run", parts=2)
    done = subprocess.run(
        [sys.executable, "-c", RESUMED_OTHERWISE, str(corpus), str(output), str(bilm_path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    refusal, started = done.stdout.splitlines()
    assert refusal.startswith(
        f'RunFolderError --resume: the unfinished run into {output} has another layers ("average"'
    )
    assert started == "ray started: False"
