"""Published ELMo biLMs by name: the catalogue, resumable downloads, a verified local cache that
many processes share, and the one rule that turns a string into a biLM (`names.py`).

Layered between `bilm/` (which converts the files) and `pipeline/` + `cli/` (which use the names).
"""

from .catalog import (
    PUBLISHED_MODELS,
    UNSUPPORTED_MODELS,
    PublishedModel,
    UnsupportedModel,
    find_published_model,
    is_published_name,
)
from .errors import DownloadError, HubError, UnknownModelError
from .install import published_model_dir
from .loading import LocatedBiLM, load_bilm, locate_bilm
from .names import AmbiguousNameWarning, ResolvedName, resolve_name

__all__ = [
    "PUBLISHED_MODELS",
    "UNSUPPORTED_MODELS",
    "AmbiguousNameWarning",
    "DownloadError",
    "HubError",
    "LocatedBiLM",
    "PublishedModel",
    "ResolvedName",
    "UnknownModelError",
    "UnsupportedModel",
    "find_published_model",
    "is_published_name",
    "load_bilm",
    "locate_bilm",
    "published_model_dir",
    "resolve_name",
]
