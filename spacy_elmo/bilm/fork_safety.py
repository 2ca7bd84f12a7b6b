"""Forked children run torch on one thread, so they never touch the parent's OpenMP pool.

PyTorch's CPU kernels run on a GNU OpenMP thread pool. `fork()` copies the pool's bookkeeping into
the child but not its threads, so the child's first parallel kernel waits forever at a barrier
for workers that do not exist. spaCy's `nlp.pipe(n_process > 1)` forks (the default start method
on Linux) from a parent that has usually run the biLM already. A child on one thread runs its
kernels inline and never enters the inherited pool; PyTorch's own `DataLoader` gives its forked
workers one thread for the same reason. With one process per core this is also the thread count
that does not oversubscribe the machine. Children started with `spawn` or `forkserver` begin
with a fresh interpreter and keep torch's default.
"""

from __future__ import annotations

import os

import torch


def use_one_thread_in_forked_child() -> None:
    """Runs in the child right after `os.fork()` (and multiprocessing's fork start method)."""
    torch.set_num_threads(1)


os.register_at_fork(after_in_child=use_one_thread_in_forked_child)
