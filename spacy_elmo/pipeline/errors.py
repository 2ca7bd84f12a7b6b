"""Errors of the spaCy integration (all are `ElmoError`s)."""

from __future__ import annotations

from ..bilm.errors import ElmoError


class ElmoPipelineError(ElmoError, ValueError):
    """The elmo component, a listener or a config section is used or set up wrongly."""
