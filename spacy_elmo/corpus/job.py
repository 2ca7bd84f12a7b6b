"""`CorpusJob`: what a corpus run computes and how its output is cut, checked once when it is
made, for both engines and before anything slow starts (a model loaded, a cluster joined)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..bilm.errors import ConfigError
from .layer_choice import LAYER_CHOICES

PRECISIONS = ("fp32", "bf16", "int8", "auto")
# Parquet files of about this size: what Ray Data and Spark aim their files at, and what readers
# and object stores handle best (a few large objects, not millions of small ones)
TARGET_FILE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class CorpusJob:
    """What a run computes and how its output is cut.

    model / weights: embed with a biLM; pipeline: annotate with a trained pipeline (one of the two).
    layers: the `vectors` column: "all", "top", "average", "mix" or "none".
    precision: the biLM's products: "fp32", "bf16", "int8" or "auto" (with `model` only).
    batch_size: rows a worker embeds at once (speed only).
    rows_per_file: rows of one output file of the Ray engine; None: files of about
        `target_file_bytes` of Parquet. An unfinished file is what a killed worker loses.
    """

    model: str | Path | None = None
    pipeline: str | Path | None = None
    weights: Path | None = None
    layers: str = "average"
    precision: str = "fp32"
    batch_size: int = 64
    rows_per_file: int | None = None
    target_file_bytes: int = TARGET_FILE_BYTES

    def __post_init__(self) -> None:
        if (self.model is None) == (self.pipeline is None):
            raise ConfigError("run_corpus: give either model (to embed) or pipeline (to annotate), not both.")
        if self.layers not in LAYER_CHOICES:
            raise ConfigError(f"layers={self.layers!r}: use one of {', '.join(LAYER_CHOICES)}.")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision={self.precision!r}: use one of {', '.join(PRECISIONS)}.")
        if self.pipeline is not None and self.precision != "fp32":
            raise ConfigError(
                f"precision={self.precision!r} steers a biLM given as model=; a pipeline runs at the "
                "precision its elmo component's config says (set components.elmo.precision there)."
            )
        for name in ("batch_size", "rows_per_file", "target_file_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name}={value!r}: give a whole number of 1 or more.")
