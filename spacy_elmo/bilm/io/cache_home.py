"""The root of spacy-elmo's cache: published biLMs (`hub/cache.py`) and precision timings."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_cache_path

from ..errors import ConfigError

CACHE_VARIABLE = "SPACY_ELMO_CACHE"
CACHE_FOLDER = "spacy-elmo"


def cache_root() -> Path:
    """`$SPACY_ELMO_CACHE`, else `spacy-elmo` in this platform's user cache folder (platformdirs:
    `$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on
    Windows).

    Raises ConfigError when that path exists and is not a directory."""
    configured = os.environ.get(CACHE_VARIABLE, "").strip()
    root = (
        Path(configured).expanduser()
        if configured
        else user_cache_path(CACHE_FOLDER, appauthor=False, opinion=False)
    )
    if root.exists() and not root.is_dir():
        source = f"{CACHE_VARIABLE}={configured}" if configured else f"The cache folder {root}"
        raise ConfigError(
            f"{source} is a file, not a directory: point {CACHE_VARIABLE} at a directory "
            "(it is created when missing)."
        )
    return root
