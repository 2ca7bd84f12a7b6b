"""Shared test set-up: data locations. Tests run with torch's default thread count, as users run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPACY_ELMO_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data`: the TensorFlow fixture and the EWT corpora (never copied into the repo)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"needs the shared data folder (UD/UNER EWT, the TensorFlow fixture), not found at "
            f"{SHARED_DATA}: set SPACY_ELMO_SHARED_DATA to it"
        )
    return SHARED_DATA


from .hub.file_server import file_server, hub_environment  # noqa: E402,F401  (fixtures for every folder)
