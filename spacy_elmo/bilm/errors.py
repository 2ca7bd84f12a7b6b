"""Exception types of spacy-elmo: each message says what was wrong, where, and how to fix it."""

from __future__ import annotations


class ElmoError(Exception):
    """Base class of every error spacy-elmo raises on purpose."""


class ConfigError(ElmoError, ValueError):
    """A biLM configuration (options.json, config.json or a preset) is invalid."""


class WeightFileError(ElmoError, ValueError):
    """A weight file is missing a tensor, has a wrong shape, or does not match its options."""


class InputError(ElmoError, TypeError):
    """Sentences or character ids passed to the biLM have the wrong type or layout."""
