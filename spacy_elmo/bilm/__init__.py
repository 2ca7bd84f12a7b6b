"""The ELMo biLM in pure PyTorch + numpy: no spaCy, no Thinc.

Its names are imported on first use, so that code needing only `bilm.errors` (a Ray read task,
the corpus readers) does not pay for torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .chars import batch_to_ids
    from .config import PRESETS, BiLMConfig
    from .errors import ConfigError, ElmoError, InputError, WeightFileError
    from .model import BiLM
    from .scalar_mix import ScalarMix

MODULE_OF = {
    "PRESETS": "config",
    "BiLM": "model",
    "BiLMConfig": "config",
    "ConfigError": "errors",
    "ElmoError": "errors",
    "InputError": "errors",
    "ScalarMix": "scalar_mix",
    "WeightFileError": "errors",
    "batch_to_ids": "chars",
}
__all__ = [
    "PRESETS",
    "BiLM",
    "BiLMConfig",
    "ConfigError",
    "ElmoError",
    "InputError",
    "ScalarMix",
    "WeightFileError",
    "batch_to_ids",
]


def __getattr__(name: str) -> Any:
    if name in MODULE_OF:
        return getattr(importlib.import_module(f".{MODULE_OF[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
