"""The thread policy: which count a batch runs at, from what batches took and what else runs.

The chooser is driven with made-up timings (a machine where 2 threads are faster, one where 1 is,
one that changes); no test here times anything. The process tests run the bundled biLM in a
child with torch's default thread count, as users run it, and check only which count its batches
run at and the count the calling thread has afterwards (or that it left the user's alone), with
a timeout in case a forked child hangs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from spacy_elmo.bilm.threads import ThreadChooser, candidate_counts, cgroup_cpu_quota, physical_cores

IDLE = {1: 1.35, 2: 1.0}
"""Seconds per position on an idle 2-core machine: the second thread is worth a third more."""
BUSY = {1: 1.35, 2: 13.5}
"""With a busy process beside it: one thread keeps its core, the 2-thread team waits for its
descheduled thread."""
BUSY_WAITS = {1: 0.0, 2: 0.5}
"""Fraction of a batch the calling thread waits for a CPU with a busy process beside it."""
IDLE_WAITS = {1: 0.0, 2: 0.0}


def run(
    chooser: ThreadChooser,
    batches: int,
    speeds: Callable[[int], dict[int, float]],
    waits: dict[int, float] | None,
) -> list[int]:
    """Counts the chooser ran `batches` batches at, batch i taking `speeds(i)[count]` per position
    and waiting `waits[count]` of it for a CPU (None: the platform does not say)."""
    counts = []
    for index in range(batches):
        count = chooser.choose()
        chooser.record(count, speeds(index)[count] * 1000, 1000, None if waits is None else waits[count])
        counts.append(count)
    return counts


def test_candidate_counts_are_powers_of_two_up_to_the_budget():
    assert candidate_counts(1) == [1]
    assert candidate_counts(2) == [1, 2]
    assert candidate_counts(6) == [1, 2, 4, 6]
    assert candidate_counts(16) == [1, 2, 4, 8, 16]


def test_an_idle_machine_keeps_every_thread_and_probes_less_and_less():
    counts = run(ThreadChooser(2), 2000, lambda _: IDLE, IDLE_WAITS)
    assert counts[0] == 2 and counts[-1] == 2
    probes = [index for index, count in enumerate(counts) if count == 1]
    assert 3 <= len(probes) <= 12, probes  # each lost probe waits longer than the one before
    assert all(later - earlier > 10 for earlier, later in zip(probes[1:], probes[2:], strict=False))
    slowdown = sum(IDLE[count] for count in counts) / (len(counts) * IDLE[2])
    assert slowdown < 1.01


def test_a_busy_machine_moves_to_one_thread_after_one_batch_that_waited():
    counts = run(ThreadChooser(2), 50, lambda _: BUSY, BUSY_WAITS)
    assert counts[:2] == [2, 1] and counts[-1] == 1


def test_without_waiting_figures_a_busy_machine_moves_to_one_thread_after_three_batches():
    counts = run(ThreadChooser(2), 50, lambda _: BUSY, None)
    assert counts[:4] == [2, 2, 2, 1] and counts[4:].count(2) == 1  # one probe back, which loses


@pytest.mark.parametrize("waits", [BUSY_WAITS, None], ids=["waiting known", "waiting unknown"])
def test_on_a_busy_machine_losing_probes_cost_at_most_a_few_percent(waits):
    counts = run(ThreadChooser(2), 3000, lambda _: BUSY, waits)
    assert counts[-1] == 1
    slowdown = sum(BUSY[count] for count in counts) / (len(counts) * BUSY[1])
    assert slowdown < 1.05, slowdown


def test_it_goes_back_to_every_thread_when_the_machine_frees_up():
    chooser = ThreadChooser(2)
    assert run(chooser, 200, lambda _: BUSY, BUSY_WAITS)[-1] == 1
    after = run(chooser, 1100, lambda _: IDLE, IDLE_WAITS)
    first_two = after.index(2)  # the next probe of 2, at most MAX_INTERVAL batches later, wins
    assert first_two < 1024 and set(after[first_two : first_two + 3]) == {2} and after[-1] == 2


def test_a_machine_that_becomes_busy_is_left_for_one_thread_within_two_batches():
    chooser = ThreadChooser(2)
    assert run(chooser, 300, lambda _: IDLE, IDLE_WAITS)[-1] == 2
    after = run(chooser, 20, lambda _: BUSY, BUSY_WAITS)
    assert after[:2] == [2, 1] and after[2:].count(2) <= 1  # at most one probe back, which loses


def test_waiting_that_one_thread_does_not_beat_is_not_probed_again_and_again():
    """A niced background job makes the threads wait a little, yet 2 threads stay faster."""
    counts = run(ThreadChooser(2), 1000, lambda _: IDLE, {1: 0.2, 2: 0.2})
    assert counts[-1] == 2 and counts.count(1) <= 12


def test_a_large_budget_climbs_down_to_the_count_that_is_fastest():
    def speeds(_: int) -> dict[int, float]:  # 8 threads best: the other 8 cores are taken
        return {1: 8.0, 2: 4.0, 4: 2.0, 8: 1.0, 16: 6.0}

    counts = run(ThreadChooser(16), 400, speeds, None)
    assert counts[-1] == 8 and counts[-100:].count(8) >= 97


def test_noise_in_batch_times_does_not_make_it_leave_the_faster_count():
    def noisy(index: int) -> dict[int, float]:  # batches of different lengths: +-15% per batch
        factor = 1 + 0.15 * ((index * 7919) % 11 - 5) / 5
        return {count: seconds * factor for count, seconds in IDLE.items()}

    counts = run(ThreadChooser(2), 2000, noisy, IDLE_WAITS)
    assert counts[-200:].count(2) >= 198


def test_cgroup_quotas_are_read_from_v2_and_v1_files(tmp_path: Path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(tmp_path) == 2.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_quota(tmp_path) is None


def user_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment as a user's: without the suite's SPACY_ELMO_THREADS=fixed, plus `extra`."""
    environment = {name: value for name, value in os.environ.items() if name != "SPACY_ELMO_THREADS"}
    return {**environment, **(extra or {})}


def threads_after_batches(setup: str, env: dict[str, str] | None = None, *, batches: int = 12) -> str:
    """What a child prints after `setup` then `batches` batches of the bundled biLM: torch's count
    in the calling thread, then the count the policy's batches run at ("None": left alone)."""
    script = (
        "import os, torch\n"
        + textwrap.dedent(setup)
        + textwrap.dedent(
            f"""
        from spacy_elmo.bilm.threads import THREAD_POLICY
        from spacy_elmo.bundled import load_bundled_bilm
        bilm = load_bundled_bilm()
        for _ in range({batches}):
            bilm.embed_sentences([["A", "short", "sentence", "."]] * 8)
        print(torch.get_num_threads(), getattr(THREAD_POLICY.chooser(), "count", None))
        """
        )
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        env=user_environment(env),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


ONE_CPU = "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks here")
@pytest.mark.slow
def test_a_process_allowed_one_cpu_runs_its_batches_on_one_thread_and_gives_back_torchs_count():
    # torch counts the machine's cores whatever the affinity mask says
    assert threads_after_batches(ONE_CPU) == f"{physical_cores()} 1"


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks here")
@pytest.mark.parametrize(
    ("setup", "env", "expected"),
    [
        ("torch.set_num_threads(3)\n", {}, "3 None"),
        (ONE_CPU, {"OMP_NUM_THREADS": "2"}, "2 None"),
        (ONE_CPU, {"SPACY_ELMO_THREADS": "fixed"}, f"{physical_cores()} None"),  # torch's default
    ],
    ids=["set_num_threads", "OMP_NUM_THREADS", "SPACY_ELMO_THREADS=fixed"],
)
def test_the_users_count_is_never_changed(setup: str, env: dict[str, str], expected: str):
    assert threads_after_batches(setup, env) == expected


@pytest.mark.slow
def test_a_count_the_user_sets_between_batches_is_kept():
    script = textwrap.dedent(
        """
        import os, torch
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # so that the policy moves to 1
        from spacy_elmo.bilm.threads import THREAD_POLICY
        from spacy_elmo.bundled import load_bundled_bilm
        bilm = load_bundled_bilm()
        bilm.embed_sentences([["A", "sentence"]] * 4)
        torch.set_num_threads(3)
        for _ in range(8):
            bilm.embed_sentences([["A", "sentence"]] * 4)
        print(torch.get_num_threads(), dict(THREAD_POLICY.chooser().batches_at))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=user_environment()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split(maxsplit=1) == ["3", "{1: 1}\n"]  # one batch at 1 thread, then the user's 3


@pytest.mark.slow
def test_a_bad_policy_name_says_which_names_work():
    script = "from spacy_elmo.bundled import load_bundled_bilm; load_bundled_bilm().embed_sentences([['a']])"
    env = user_environment({"SPACY_ELMO_THREADS": "many"})
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env
    )
    assert done.returncode != 0
    assert "SPACY_ELMO_THREADS='many': use 'adaptive'" in done.stderr and "'fixed'" in done.stderr


@pytest.mark.slow
def test_a_child_forked_after_batches_runs_on_one_thread_and_finishes():
    setup = textwrap.dedent(
        """
        from spacy_elmo.bundled import load_bundled_bilm
        parent = load_bundled_bilm()
        for _ in range(6):
            parent.embed_sentences([["A", "short", "sentence", "."]] * 8)
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            raise SystemExit(os.waitstatus_to_exitcode(status))
        """
    )
    assert threads_after_batches(setup) == "1 None"
