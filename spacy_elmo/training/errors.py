"""Errors of biLM pretraining: each says what was wrong, where, and how to fix it."""

from __future__ import annotations

from ..bilm.errors import ElmoError


class TrainingConfigError(ElmoError, ValueError):
    """A pretraining config has an unknown section or key, or a value out of range."""


class CorpusError(ElmoError, ValueError):
    """The training or dev text is missing, empty, or not valid UTF-8."""


class OutputDirError(ElmoError, ValueError):
    """The output directory holds another model or run (use --resume or --force)."""


class DeviceError(ElmoError, RuntimeError):
    """The requested GPU is not available."""
