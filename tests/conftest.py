"""Shared test set-up: one torch thread (robust on a loaded 2-core machine), data locations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPACY_ELMO_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data`: the TensorFlow fixture and the EWT corpora (never copied into the repo)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"{SHARED_DATA} is missing: set SPACY_ELMO_SHARED_DATA to the shared data folder.")
    return SHARED_DATA
