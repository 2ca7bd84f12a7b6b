"""Ctrl-C and SIGTERM during a Ray run: the run unwinds (its output claim released, the parts
written kept, the local cluster the command started shut down) and ends with one line saying
what was kept and how to go on."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..bilm.errors import ElmoError


class SigtermInterrupt(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt."""


class RunStoppedError(ElmoError):
    """A run stopped by Ctrl-C or SIGTERM: the exit status is 128 + the signal's number, as a
    shell reports a process that the signal ended."""

    def __init__(self, message: str, signal_number: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signal_number


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises `SigtermInterrupt` in the main thread for the with-block's time, so the run
    unwinds as it does for Ctrl-C; the handler before is set back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, raise_sigterm_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def raise_sigterm_interrupt(number: int, frame: Any) -> None:
    raise SigtermInterrupt


def stopped_run(output: str, interrupt: KeyboardInterrupt) -> RunStoppedError:
    """The one line of a Ray run into `output` that `interrupt` stopped: what it kept, how to go on."""
    from ..corpus.ray.run_folder import RunFolder
    from ..corpus.sources import filesystem_of

    number = signal.SIGTERM if isinstance(interrupt, SigtermInterrupt) else signal.SIGINT
    parts = RunFolder(*filesystem_of(output)).count_parts()
    kept = (
        f"the {parts:,} parts written so far are kept: run the same command with --resume to go on "
        "from them, or --force to start over"
        if parts
        else f"nothing was written to {output}: run the command again"
    )
    return RunStoppedError(f"Stopped by {signal.Signals(number).name}: {kept}.", number)
