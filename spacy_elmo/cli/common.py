"""What every `spacy-elmo` command shares: the typer `app` they register on, the rules of an
output path, and `reports_errors` (spacy-elmo's own errors as a message, not a traceback). Imports
no command, so the commands import it and `cli/__init__.py` imports them."""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ..bilm.errors import ElmoError
from ..bilm.io.atomic import remove_unfinished
from ..corpus.outputs import OutputExistsError, OutputPathError, check_regular_file, inside
from .interrupts import RunStoppedError

app = typer.Typer(
    name="spacy-elmo",
    help=(
        "ELMo biLMs for spaCy: init-config, download, pretrain, evaluate, fine-tune, export-checkpoint, "
        "embed, annotate, info, convert and export."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain click help: flags without the rich renderer's <bool> metavar
)

Command = TypeVar("Command", bound=Callable[..., Any])


Force = Annotated[bool, typer.Option("--force", help="Overwrite the output if it exists.")]


def check_output(path: Path, force: bool, *, directory: bool = False, inputs: Sequence[Path] = ()) -> None:
    """The rules of every command that writes: never over one of its `inputs`, even with --force;
    a file where a file goes, a directory where a directory goes (`directory`), never a device or
    a FIFO; an existing file, or a directory with anything in it, is overwritten only with --force."""
    refuse_output_over_inputs(path, inputs)
    check_regular_file(path)
    if directory and path.is_file():
        raise OutputPathError(f"The output {path} is a file; it must be a directory: give a directory path.")
    if not directory and path.is_dir():
        raise OutputPathError(f"The output {path} is a directory; it must be a file: give a file path.")
    if force:
        return
    if path.is_file() or (path.is_dir() and any(path.iterdir())):
        raise OutputExistsError(f"{path} exists already: pass --force to overwrite it, or give another path.")


def refuse_output_over_inputs(path: Path, inputs: Sequence[Path]) -> None:
    """Never write over one of the `inputs`, however either is spelled (`m2`, `./m2/`, an absolute
    path, a link to it), nor into a directory that holds one, even with --force."""
    for source in inputs:
        if path.exists() and source.exists() and path.samefile(source):
            raise OutputPathError(
                f"The output {path} is the input {source}: writing it would destroy the input. "
                "Give another output path."
            )
        if path.is_dir() and source.exists() and inside(str(source.resolve()), str(path.resolve())):
            raise OutputPathError(
                f"The output {path} holds the input {source}: writing it (or --force) would destroy the "
                "input. Give another output path."
            )


def stop_on_sigterm() -> None:
    """SIGTERM (a job scheduler's, `kill`'s) removes the command's half-written temporary files
    and output claims, then ends the process as SIGTERM does. Nothing else runs on the way out:
    unwinding from wherever the signal landed (inside a library holding a lock) could hang."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop_now)


def stop_now(number: int, frame: Any) -> None:
    remove_unfinished()
    os.write(2, f"Error: {stopped_line(signal.Signals(number).name)}\n".encode())
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


def stopped_line(signal_name: str) -> str:
    """What a command stopped by a signal (outside a Ray run, which says more) leaves, in one line."""
    return (
        f"Stopped by {signal_name}: the unfinished output was removed, outputs written before are "
        "kept; run the command again (pretrain and fine-tune: with --resume, from the last checkpoint)."
    )


def reports_errors(command: Command) -> Command:
    """Turn an `ElmoError`, or a file the system cannot read or write (permissions, a full
    disk), into a one-line message on stderr and exit status 1; Ctrl-C into one line too."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stop_on_sigterm()
        try:
            return command(*args, **kwargs)
        except ElmoError as error:
            message, status = str(error), error.exit_code if isinstance(error, RunStoppedError) else 1
        except OSError as error:
            message = f"cannot use {error.filename}: {error.strerror}." if error.filename else f"{error}."
            status = 1
        except KeyboardInterrupt:  # Ctrl-C: the with-blocks on the way removed what was unfinished
            message, status = stopped_line("SIGINT"), 128 + signal.SIGINT
        typer.secho(f"Error: {message}", fg=typer.colors.RED, err=True)
        raise typer.Exit(status)

    return wrapper  # type: ignore[return-value]
