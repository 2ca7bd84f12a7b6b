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


def check_document_format(document: object, source: object, name: str, version: int, what: str) -> None:
    """Raise `ConfigError` unless a JSON document says `"format": name` and `"format_version": version`."""
    if not isinstance(document, dict) or document.get("format") != name:
        raise ConfigError(f'{source} is not a spacy-elmo {what} (no "format": "{name}").')
    if document.get("format_version") != version:
        raise ConfigError(
            f"{source} has format_version {document.get('format_version')!r}; this version of "
            f"spacy-elmo reads version {version}. Upgrade spacy-elmo."
        )
