"""The root of spacy-elmo's cache: published biLMs (`hub/cache.py`) and precision timings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import ConfigError

CACHE_VARIABLE = "SPACY_ELMO_CACHE"
CACHE_FOLDER = "spacy-elmo"


def cache_root() -> Path:
    """`$SPACY_ELMO_CACHE`, else `spacy-elmo` in the user cache folder of this platform.

    Raises ConfigError when that path exists and is not a directory."""
    configured = os.environ.get(CACHE_VARIABLE, "").strip()
    root = Path(configured).expanduser() if configured else _user_cache_home() / CACHE_FOLDER
    if root.exists() and not root.is_dir():
        source = f"{CACHE_VARIABLE}={configured}" if configured else f"The cache folder {root}"
        raise ConfigError(
            f"{source} is a file, not a directory: point {CACHE_VARIABLE} at a directory "
            "(it is created when missing)."
        )
    return root


def _user_cache_home() -> Path:
    """`%LOCALAPPDATA%` on Windows, `~/Library/Caches` on macOS, `$XDG_CACHE_HOME` or `~/.cache`."""
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
