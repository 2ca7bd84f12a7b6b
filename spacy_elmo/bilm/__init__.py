"""The ELMo biLM in pure PyTorch + numpy: no spaCy, no Thinc."""

from . import fork_safety  # noqa: F401  (registers the after-fork hook once per process)
from .chars import batch_to_ids
from .config import PRESETS, BiLMConfig
from .errors import ConfigError, ElmoError, InputError, WeightFileError
from .model import BiLM
from .scalar_mix import ScalarMix

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
