"""Errors of the spaCy integration (all are `ElmoError`s)."""

from __future__ import annotations

import click

from ..bilm.errors import ElmoError


class ElmoPipelineError(ElmoError, ValueError):
    """The elmo component, a listener or a config section is used or set up wrongly."""


class ElmoWeightsError(click.ClickException, ElmoPipelineError):
    """The biLM weights cannot be had at `nlp.initialize()` (a path that is not there, a published
    model that cannot be downloaded, no weights for a language other than English).

    It is a `click.ClickException` too, so that spaCy's CLI (`python -m spacy train`) shows it as
    one line, `Error: <message>`, the way it shows its own errors, instead of a traceback from
    deep inside spaCy; in Python it is an ordinary `ElmoPipelineError`.
    """
