"""Published ELMo biLMs by name: the catalogue, resumable downloads, and a verified local cache.

Layered between `bilm/` (which converts the files) and `pipeline/` + `cli/` (which use the names).
"""

from .catalog import PUBLISHED_MODELS, PublishedModel, find_published_model, is_published_name
from .errors import DownloadError, HubError, UnknownModelError
from .install import published_model_dir

__all__ = [
    "PUBLISHED_MODELS",
    "DownloadError",
    "HubError",
    "PublishedModel",
    "UnknownModelError",
    "find_published_model",
    "is_published_name",
    "published_model_dir",
]
