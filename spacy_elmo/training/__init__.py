"""Pretraining and fine-tuning the biLM on raw text, and held-out perplexity."""

from .config import PretrainConfig, load_pretrain_config
from .errors import CorpusError, DeviceError, OutputDirError, TrainingConfigError
from .evaluate import load_language_model, perplexity, sentence_perplexity
from .pretrain import InitialModel, load_initial_model, pretrain

__all__ = [
    "CorpusError",
    "DeviceError",
    "InitialModel",
    "OutputDirError",
    "PretrainConfig",
    "TrainingConfigError",
    "load_initial_model",
    "load_language_model",
    "load_pretrain_config",
    "perplexity",
    "pretrain",
    "sentence_perplexity",
]
