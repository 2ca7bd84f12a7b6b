"""Errors of the spaCy integration (all are `ElmoError`s)."""

from __future__ import annotations

import typer

from ..bilm.errors import ElmoError

# The exception class that a typer CLI, spaCy's included, reports as `Error: message` without a
# traceback: click's `ClickException`. Typer 0.26 and later include their own copy of click and
# catch that copy's class, not the `click` package's (so `import click` would give a class typer
# lets through as a traceback), and typer exports no public name for it. Its public
# `typer.BadParameter` is a subclass: the class is found among that one's bases, by name, so no
# private module of typer is imported. A test runs `python -m spacy train` with a bad setting to
# check that spaCy's CLI still reports it this way.
CLIReportedError: type[Exception] = next(
    base for base in typer.BadParameter.__mro__ if base.__name__ == "ClickException"
)


class ElmoPipelineError(ElmoError, ValueError):
    """The elmo component, a listener or a config section is used or set up wrongly."""


class ElmoWeightsError(CLIReportedError, ElmoPipelineError):
    """The biLM weights cannot be had at `nlp.initialize()` (a path that is not there, a published
    model that cannot be downloaded, no weights for a language other than English).

    It is a click exception too, so that spaCy's CLI (`python -m spacy train`) shows it as a
    message, `Error: ...`, the way it shows its own errors, instead of a traceback from deep
    inside spaCy; in Python it is an ordinary `ElmoPipelineError`.
    """


class ElmoSettingError(CLIReportedError, ElmoPipelineError):
    """A setting of the elmo component or a listener is out of range (`max_length = -3`, mix
    weights that are not finite float32 numbers), found when the config is resolved.

    A click exception too, for the reason `ElmoWeightsError` is: `python -m spacy train` shows our
    message naming the setting instead of a traceback.
    """
