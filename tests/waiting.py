"""Waiting in tests for what another process does (a file written, a worker started)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

Found = TypeVar("Found")


def wait_for(condition: Callable[[], Found], what: str, timeout_s: float = 120.0) -> Found:
    """The first truthy value of `condition()`, polled every 20 ms; fails the test after
    `timeout_s` seconds, naming `what` it waited for."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
