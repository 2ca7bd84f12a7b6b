"""The project's EWT asset step: shared copies or downloads, checked by sha256, never left half-written."""

from __future__ import annotations

import hashlib
import importlib
import socket
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "project" / "scripts"))
ewt_assets = importlib.import_module("ewt_assets")

CONLLU = "# sent_id = s1\n# text = Hello there .\n1\tHello\n\n# sent_id = s2\n# text = Bye .\n1\tBye\n\n"


def pinned_source(folder: Path, name: str, text: str) -> tuple[Path, str]:
    """A source file and its sha256."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf8")
    return path, hashlib.sha256(text.encode("utf8")).hexdigest()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_files_absent_from_shared_are_downloaded_and_their_raw_text_written(tmp_path, monkeypatch):
    files = {}
    for split in ("train", "dev", "test"):
        relative = f"ud_en_ewt/en_ewt-ud-{split}.conllu"
        source, checksum = pinned_source(tmp_path / "public", relative, CONLLU)
        files[relative] = (source.as_uri(), checksum)
    monkeypatch.setattr(ewt_assets, "FILES", files)
    assets = tmp_path / "assets"
    ewt_assets.fetch(tmp_path / "no-shared-data", assets)
    ewt_assets.write_raw_text(assets)
    assert (assets / "ud_en_ewt" / "en_ewt-ud-dev.conllu").read_text(encoding="utf8") == CONLLU
    assert not list(assets.rglob("*.part"))
    assert (assets / "ewt-test.txt").read_text(encoding="utf8") == "Hello there .\nBye .\n"


def test_an_unreachable_source_says_which_url_and_where_a_copy_would_be_taken_from(tmp_path, monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/en_ewt-ud-train.conllu"
    monkeypatch.setattr(ewt_assets, "FILES", {"ud_en_ewt/en_ewt-ud-train.conllu": (url, "0" * 64)})
    shared = tmp_path / "shared"
    with pytest.raises(SystemExit) as error:
        ewt_assets.fetch(shared, tmp_path / "assets")
    message = str(error.value)
    assert url in message and str(shared / "ud_en_ewt" / "en_ewt-ud-train.conllu") in message
    assert "--vars.shared_data" in message
    assert [path.name for path in (tmp_path / "assets").rglob("*")] == ["ud_en_ewt"]  # no .part file


def test_a_damaged_shared_copy_is_refused_and_not_left_in_assets(tmp_path, monkeypatch):
    relative = "uner_en_ewt/en_ewt-ud-dev.iob2"
    _, checksum = pinned_source(tmp_path / "public", relative, "Bye\tO\n")
    pinned_source(tmp_path / "shared", relative, "Bye\tB-PER\n")
    monkeypatch.setattr(ewt_assets, "FILES", {relative: ("https://unused.invalid/", checksum)})
    with pytest.raises(SystemExit, match=r"uner_en_ewt/en_ewt-ud-dev.iob2: the sha256 of .*shared"):
        ewt_assets.fetch(tmp_path / "shared", tmp_path / "assets")
    assert list((tmp_path / "assets" / "uner_en_ewt").iterdir()) == []
