"""How many threads torch's kernels use for the biLM: chosen by measuring, batch by batch.

PyTorch's CPU kernels run on an OpenMP team whose threads wait for each other at the end of every
parallel kernel, and a biLM batch is thousands of small kernels (a few per LSTM step). When
another process holds one of the cores, the team's thread on that core is descheduled and every
kernel waits for it: on 2 cores with one busy process beside it, 2 threads ran the bundled
pipeline several times slower than 1 thread (docs/speed.md, "On a busy machine"). On an idle
machine the second thread is worth about a third more. No count is right for both, so the count
is chosen while the biLM runs:

- **Budget.** The most threads the process may use: torch's count, but no more than the CPUs the
  process may run on (its affinity mask) and its cgroup CPU quota. torch counts the machine's
  cores, so in a container limited to 2 CPUs of a 32-core machine it would start 32 threads.
- **Probes.** Each calling thread keeps the time per padded position of its recent batches at the
  count it uses. Now and then one batch runs at the next smaller (or larger) count; if that
  batch is more than 10% faster, the count moves there. A probe that loses waits twice as long
  before it is tried again, and longer the more it lost, so probing costs a few percent at most.
- **Waiting.** On Linux the kernel counts how long the calling thread waited for a CPU while it
  was ready to run (`/proc/thread-self/schedstat`). When a batch spent more than a tenth of its
  time waiting, cores are taken: the next batch probes the smaller count at once. (The machine's
  count of runnable tasks in `/proc/loadavg` is no use here: in a container it counts the host's
  tasks, and on our development VM it never fell below 5 on an idle machine.)

The chosen count is the biLM's own: each batch hands the calling thread back the count it found,
also when the batch raises, so the user's other torch models in that thread run at their count.
The user's choice always wins: with `OMP_NUM_THREADS` or `MKL_NUM_THREADS` set, with
`SPACY_ELMO_THREADS=fixed`, or with a count other than torch's default in the calling thread
(`torch.set_num_threads(n)`, forked children's single thread), nothing is changed, and a count
changed by the user between batches is left alone from then on. (A count set to torch's default
cannot be told apart from the default: `SPACY_ELMO_THREADS=fixed` keeps it.)

OpenMP thread counts belong to the calling thread: each thread that runs the biLM (a service's
request threads) gets its own chooser.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import fork_safety  # noqa: F401  (registers the forked child's one thread, which the policy keeps)
from .errors import ConfigError

POLICY_ENV = "SPACY_ELMO_THREADS"
POLICIES = ("adaptive", "fixed")
USER_COUNT_ENVS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

FASTER_BY = 0.9
"""A probe wins when its time per position is below this fraction of the current count's."""
FIRST_PROBE = 3
"""Batches at a new count before its neighbours are tried."""
MAX_INTERVAL = 1024
"""Most batches between two probes of one count."""
WAITING = 0.1
"""A batch whose thread waited for a CPU longer than this fraction of its time had cores taken."""
PROBE_COST = 0.02
"""What probing a losing count may cost: it waits (slowdown - 1) / PROBE_COST batches."""
SMOOTHING = 0.5
"""Weight of the newest batch in the running time per position."""


def cpu_budget() -> int:
    """CPUs this process may use: the affinity mask's size, capped by a cgroup CPU quota."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(available, math.ceil(quota))) if quota else available


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs per period the process's cgroup allows (v2 `cpu.max`, v1 `cpu.cfs_quota_us`), or None."""
    try:
        if (root / "cpu.max").exists():
            quota, period = (root / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


@functools.cache
def physical_cores(root: Path = Path("/sys/devices/system/cpu")) -> int:
    """The machine's cores as torch counts them for its default (SMT siblings once), else the CPUs."""
    cores = set()
    for topology in root.glob("cpu[0-9]*/topology"):
        try:
            cores.add(((topology / "physical_package_id").read_text(), (topology / "core_id").read_text()))
        except OSError:
            continue
    return len(cores) or os.cpu_count() or 1


def waiting_seconds() -> float | None:
    """How long the calling thread has waited on a run queue (Linux schedstat), None elsewhere."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def candidate_counts(budget: int) -> list[int]:
    """Counts a chooser moves between, ascending: powers of two below `budget`, then `budget`."""
    counts = [1]
    while counts[-1] * 2 < budget:
        counts.append(counts[-1] * 2)
    return counts + ([budget] if budget > 1 else [])


@dataclass
class ThreadChooser:
    """Which count one calling thread's next batch runs at, from what its batches took.

    `choose()` gives the count for the next batch; `record(count, seconds, positions, waited)`
    tells the chooser what that batch took and which fraction of it the thread waited for a CPU
    (None when unknown).
    """

    budget: int
    counts: list[int] = field(init=False)
    current: int = field(init=False)
    """Index into `counts` of the count that batches run at, when not probing."""
    seconds_per_position: dict[int, float] = field(default_factory=dict)
    next_probe: dict[int, int] = field(default_factory=dict)
    """Batch number from which each count may be probed."""
    interval: dict[int, int] = field(default_factory=dict)
    batches: int = 0
    batches_at: Counter[int] = field(default_factory=Counter)
    """How many batches ran at each count."""
    waiting: bool = False
    """Whether the last batch at the current count waited for a CPU (`WAITING`)."""

    def __post_init__(self) -> None:
        self.counts = candidate_counts(self.budget)
        self.current = len(self.counts) - 1
        self._schedule_neighbours()

    @property
    def count(self) -> int:
        return self.counts[self.current]

    def choose(self) -> int:
        """The count for the next batch: the current one, or a neighbour being probed."""
        smaller, larger = self._neighbours()
        if self.count not in self.seconds_per_position:
            return self.count
        if smaller is not None and self.batches >= self.next_probe[smaller]:
            return smaller
        if larger is not None and self.batches >= self.next_probe[larger]:
            return larger
        return self.count

    def record(self, count: int, seconds: float, positions: int, waited: float | None = None) -> None:
        """What a batch of `positions` padded positions took at `count` threads, and the fraction
        of it the calling thread waited for a CPU."""
        self.batches += 1
        self.batches_at[count] += 1
        measured = seconds / max(1, positions)
        current = self.seconds_per_position.get(self.count)
        if count == self.count or current is None:
            self._smooth(count, measured)
            self._follow_waiting(waited)
            return
        slowdown = measured / current
        self.seconds_per_position[count] = measured
        if slowdown < FASTER_BY:
            self.current = self.counts.index(count)
            self.waiting = False
            self._schedule_neighbours()
            return
        grown = max(2 * self.interval.get(count, FIRST_PROBE), math.ceil((slowdown - 1) / PROBE_COST))
        self.interval[count] = min(MAX_INTERVAL, grown)
        self.next_probe[count] = self.batches + self.interval[count]

    def _smooth(self, count: int, measured: float) -> None:
        previous = self.seconds_per_position.get(count)
        self.seconds_per_position[count] = (
            measured if previous is None else SMOOTHING * measured + (1 - SMOOTHING) * previous
        )

    def _neighbours(self) -> tuple[int | None, int | None]:
        smaller = self.counts[self.current - 1] if self.current > 0 else None
        larger = self.counts[self.current + 1] if self.current + 1 < len(self.counts) else None
        return smaller, larger

    def _schedule_neighbours(self) -> None:
        """After a move: both neighbours may be probed once the new count has a few batches."""
        for count in self._neighbours():
            if count is not None:
                self.interval[count] = FIRST_PROBE
                self.next_probe[count] = self.batches + FIRST_PROBE

    def _follow_waiting(self, waited: float | None) -> None:
        """When the current count starts to wait for CPUs, probe the smaller count next."""
        smaller, _ = self._neighbours()
        waiting = waited is not None and waited > WAITING
        if smaller is not None and waiting and not self.waiting:
            self.next_probe[smaller] = self.batches
        self.waiting = waiting


def policy_from_env() -> str:
    """`SPACY_ELMO_THREADS`: "adaptive" (the default) or "fixed"."""
    policy = os.environ.get(POLICY_ENV, "adaptive").strip().lower() or "adaptive"
    if policy not in POLICIES:
        raise ConfigError(
            f"{POLICY_ENV}={os.environ[POLICY_ENV]!r}: use 'adaptive' (choose the thread count by "
            "measuring) or 'fixed' (keep torch's count as it is)."
        )
    return policy


def user_chose_count(count: int) -> bool:
    """Whether a torch count found in a calling thread is the user's rather than torch's default."""
    if any(os.environ.get(name) for name in USER_COUNT_ENVS):
        return True
    return count != physical_cores()


class _CallerState(threading.local):
    chooser: ThreadChooser | None = None
    left_alone: bool = False
    callers_count: int | None = None
    """The count the calling thread had when its last batch started."""


class ThreadPolicy:
    """The process's thread policy: one chooser per calling thread, forgotten in a forked child."""

    def __init__(self) -> None:
        self._forget()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._callers = _CallerState()
        self._lock = threading.Lock()
        self._budget: int | None = None
        self._counts_set: set[int] = set()
        """Counts this policy set: a thread started later begins with the last one (torch gives
        new threads the process's last count), which is then not the user's."""

    def _new_chooser(self, count: int) -> ThreadChooser | None:
        with self._lock:
            if count not in self._counts_set and user_chose_count(count):
                return None
            if self._budget is None:
                self._budget = min(count, cpu_budget())
            return ThreadChooser(self._budget)

    def chooser(self) -> ThreadChooser | None:
        """The calling thread's chooser: None before its first batch or when it is left alone."""
        return self._callers.chooser

    @contextmanager
    def batch(self, positions: int) -> Iterator[None]:
        """Run one batch of `positions` padded positions at the chosen count, time it, and give
        the calling thread its own count back."""
        state = self._callers
        callers_count = torch.get_num_threads()
        if policy_from_env() == "fixed":  # read at every batch: it may be set at any time
            yield
            return
        if state.chooser is None and not state.left_alone:
            state.chooser = self._new_chooser(callers_count)
            state.left_alone = state.chooser is None
        if state.callers_count is not None and callers_count != state.callers_count:
            state.left_alone = True  # the user set a count since: never touch it again here
        state.callers_count = callers_count
        if state.left_alone:
            yield
            return
        chosen = state.chooser.choose()
        if chosen != callers_count:
            with self._lock:
                self._counts_set.add(chosen)
            torch.set_num_threads(chosen)
        try:
            waited_before, start = waiting_seconds(), time.perf_counter()
            yield
            seconds, waited_after = time.perf_counter() - start, waiting_seconds()
            waited = None if waited_before is None or waited_after is None else waited_after - waited_before
            state.chooser.record(chosen, seconds, positions, None if waited is None else waited / seconds)
        finally:
            if chosen != callers_count:
                torch.set_num_threads(callers_count)


THREAD_POLICY = ThreadPolicy()
"""The one policy of this process (torch's thread counts are the process's too)."""
