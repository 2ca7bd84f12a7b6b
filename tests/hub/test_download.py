"""Resumed transfers never splice two versions of a file: the resume asks for the rest of the
version it began with (If-Range), and starts again from the first byte when the file changed."""

from __future__ import annotations

import os

import pytest

from spacy_elmo.hub.download import download_file, partial_path

from .file_server import FileServer, etag, last_modified

PATH = "/models/weights.hdf5"
OLD = os.urandom(3000)
NEW = os.urandom(3000)


def url(server: FileServer) -> str:
    return server.root_url + PATH.removeprefix("/")


def serve_a_file_that_changes_after_the_first_cut(server: FileServer) -> None:
    server.files[PATH] = OLD
    server.cut_after, server.cuts_left = 1000, 1
    server.after_cut = lambda: server.files.update({PATH: NEW})


@pytest.mark.parametrize(
    ("send_etag", "validator"),
    [(True, etag(OLD)), (False, last_modified(OLD))],
    ids=["etag", "last-modified"],
)
def test_a_file_changed_between_two_attempts_arrives_whole_in_its_new_version(
    file_server, tmp_path, send_etag, validator
):
    file_server.send_etag = send_etag
    serve_a_file_that_changes_after_the_first_cut(file_server)
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert (tmp_path / "weights.hdf5").read_bytes() == NEW
    assert file_server.requests[1] == (PATH, "bytes=1000-") and file_server.if_ranges[1] == validator
    assert sorted(path.name for path in tmp_path.iterdir()) == ["weights.hdf5"]


def test_a_file_changed_between_two_calls_arrives_whole_in_its_new_version(file_server, tmp_path):
    file_server.files[PATH] = OLD
    file_server.cut_after, file_server.cuts_left = 500, 99
    with pytest.raises(OSError, match="run again to resume"):
        download_file(url(file_server), tmp_path / "weights.hdf5")
    assert partial_path(tmp_path / "weights.hdf5").read_bytes() == OLD[:1500]
    file_server.files[PATH], file_server.cuts_left = NEW, 0
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert (tmp_path / "weights.hdf5").read_bytes() == NEW
    assert file_server.requests[-1] == (PATH, "bytes=1500-") and file_server.if_ranges[-1] == etag(OLD)


def test_a_server_that_ignores_if_range_and_sends_another_version_is_read_again_from_the_start(
    file_server, tmp_path
):
    file_server.honour_if_range = False  # it answers 206 with the new version's bytes and ETag
    serve_a_file_that_changes_after_the_first_cut(file_server)
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert (tmp_path / "weights.hdf5").read_bytes() == NEW
    assert file_server.requests[-1] == (PATH, None)


def test_without_etag_or_last_modified_a_partial_file_is_not_resumed(file_server, tmp_path):
    file_server.send_etag = file_server.send_last_modified = False
    serve_a_file_that_changes_after_the_first_cut(file_server)
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert (tmp_path / "weights.hdf5").read_bytes() == NEW
    assert [asked for _, asked in file_server.requests] == [None, None]


def test_an_unchanged_file_is_resumed_where_it_stopped(file_server, tmp_path):
    file_server.files[PATH] = OLD
    file_server.cut_after, file_server.cuts_left = 1000, 2
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert (tmp_path / "weights.hdf5").read_bytes() == OLD
    assert [asked for _, asked in file_server.requests] == [None, "bytes=1000-", "bytes=2000-"]
    assert file_server.if_ranges == [None, etag(OLD), etag(OLD)]


def test_a_resumed_answer_without_last_modified_still_resumes(file_server, tmp_path):
    file_server.last_modified_on_partial = False  # HTTP asks a 206 to repeat the ETag, not the date
    file_server.files[PATH] = OLD
    file_server.cut_after, file_server.cuts_left = 1000, 1
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert (tmp_path / "weights.hdf5").read_bytes() == OLD
    assert [asked for _, asked in file_server.requests] == [None, "bytes=1000-"]


def test_a_partial_file_whose_version_is_not_recorded_is_not_resumed(file_server, tmp_path):
    """Left by an older spacy-elmo, or fetched from another URL (another mirror): no If-Range
    could make a resume safe."""
    file_server.files[PATH] = NEW
    partial_path(tmp_path / "weights.hdf5").write_bytes(OLD[:1000])
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert (tmp_path / "weights.hdf5").read_bytes() == NEW
    assert file_server.requests == [(PATH, None)]


def test_a_link_planted_as_the_partial_file_is_removed_and_its_target_left_alone(file_server, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("my only copy", encoding="utf8")
    partial_path(tmp_path / "weights.hdf5").symlink_to(victim)
    file_server.files[PATH] = NEW
    download_file(url(file_server), tmp_path / "weights.hdf5")
    assert victim.read_text(encoding="utf8") == "my only copy"
    assert (tmp_path / "weights.hdf5").read_bytes() == NEW
