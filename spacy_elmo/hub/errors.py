"""Errors of the published-model hub: each names the model, URL or file and how to fix it."""

from __future__ import annotations

from ..bilm.errors import ElmoError


class HubError(ElmoError):
    """A published biLM could not be found, downloaded, verified or converted."""


class UnknownModelError(HubError, ValueError):
    """A name that is not in the catalogue of published biLMs."""


class DownloadError(HubError, OSError):
    """A transfer failed: the server is unreachable, answered an error, or sent a wrong length."""
