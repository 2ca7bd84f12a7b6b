"""`spacy-elmo` commands: each one reports spacy-elmo's own errors as a message, not a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from ..bilm.errors import ElmoError

app = typer.Typer(
    name="spacy-elmo",
    help="ELMo biLMs for spaCy: pretrain, evaluate, fine-tune, embed, inspect, convert and export.",
    no_args_is_help=True,
    add_completion=False,
)

Command = TypeVar("Command", bound=Callable[..., Any])


def reports_errors(command: Command) -> Command:
    """Turn an `ElmoError` into a one-line message on stderr and exit status 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ElmoError as error:
            typer.secho(f"Error: {error}", fg=typer.colors.RED, err=True)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


# Commands register themselves on `app` when their modules are imported.
from . import convert, corpus, embed, info, pretrain  # noqa: E402,F401
