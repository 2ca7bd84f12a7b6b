"""What a forked child must not inherit from its parent's threads: their OpenMP pool and their locks.

PyTorch's CPU kernels run on a GNU OpenMP thread pool. `fork()` copies the pool's bookkeeping into
the child but not its threads, so the child's first parallel kernel waits forever at a barrier
for workers that do not exist. spaCy's `nlp.pipe(n_process > 1)` forks (the default start method
on Linux) from a parent that has usually run the biLM already. A child on one thread runs its
kernels inline and never enters the inherited pool; PyTorch's own `DataLoader` gives its forked
workers one thread for the same reason. With one process per core this is also the thread count
that does not oversubscribe the machine. Children started with `spawn` or `forkserver` begin
with a fresh interpreter and keep torch's default.

A lock has the same problem: another thread of the parent may hold it at the fork (inside a
cache, packing a weight), and no thread of the child would ever release it. `ForkSafeLock` is a
lock that every forked child finds released.
"""

from __future__ import annotations

import os
import threading
import weakref
from types import TracebackType

import torch


class ForkSafeLock:
    """A `threading.Lock` that a forked child gets fresh (what it guards stays as the parent left
    it), and that a pickled or deep-copied owner gets fresh too (a lock cannot be pickled)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        _LOCKS.add(self)

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._lock.release()

    def __reduce__(self) -> tuple[type[ForkSafeLock], tuple[()]]:
        return ForkSafeLock, ()

    def locked(self) -> bool:
        return self._lock.locked()

    def _release_in_child(self) -> None:
        self._lock = threading.Lock()


_LOCKS: weakref.WeakSet[ForkSafeLock] = weakref.WeakSet()
"""Every `ForkSafeLock` alive."""


def _after_fork_in_child() -> None:
    """Runs in the child right after `os.fork()` (and multiprocessing's fork start method)."""
    torch.set_num_threads(1)
    for lock in list(_LOCKS):
        lock._release_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
