"""Shared test set-up: data locations. Tests run with torch's default thread count, as users run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
THREAD_POLICY_ENV = "SPACY_ELMO_THREADS"
SHARED_DATA = Path(os.environ.get("SPACY_ELMO_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(autouse=True)
def fixed_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Torch's default count, never adapted by the thread policy in the test processes: tests
    compare calls bit for bit, and the policy's probes change the count between calls, which moves
    float32 rounding (1e-6). The policy has its own tests (tests/bilm/test_thread_policy.py), and
    the scripts that run as users run (tests/pipeline/test_processes.py) run without this."""
    monkeypatch.setenv(THREAD_POLICY_ENV, "fixed")


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
