"""Fork a child while the parent holds locks, as spaCy's `n_process` workers are forked from a
parent whose other threads may be inside a cache at that moment."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest


def forked_result(held: AbstractContextManager[Any], target: Callable[..., None], *args: Any) -> Any:
    """What `target(*args, results)` puts on its queue in a child forked while `held` is held;
    fails the test if the child waits for a lock no thread of it holds (60 s) or fails."""
    context = multiprocessing.get_context("fork")
    results = context.SimpleQueue()
    with held:
        child = context.Process(target=target, args=(*args, results))
        child.start()
        child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child waited for a lock no thread of it holds")
    assert child.exitcode == 0
    return results.get()
