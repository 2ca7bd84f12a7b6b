"""One cache shared by many processes: one download per name, a killed one resumed, no stale lock,
an index that keeps every process's entries, folders other users can read, and a cache two
users of one group share with `umask 002`."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo.bilm import BiLM
from spacy_elmo.hub import find_published_model, published_model_dir
from spacy_elmo.hub.catalog import mirror_path
from spacy_elmo.hub.download import partial_path
from spacy_elmo.hub.install import file_name

SENTENCE = [["The", "bank", "raised", "rates", "."]]
WAITING = "Waiting for another process that holds small"
TIMEOUT_S = 180


def start_download(name: str, log: Path) -> subprocess.Popen:
    """`spacy-elmo download NAME` in its own process (the environment carries the cache and mirror)."""
    with open(log, "w", encoding="utf8") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "spacy_elmo", "download", name],
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)


def expected_layers(source: Path) -> np.ndarray:
    return BiLM.from_allennlp(source / "options.json", source / "weights.hdf5").embed_sentences(SENTENCE)[0]


@pytest.mark.slow
def test_processes_that_ask_for_one_name_share_one_download(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    hub_environment.hold_after = 100  # the first answer stalls until the others are seen waiting
    logs = [tmp_path / f"download-{number}.log" for number in range(3)]
    processes = [start_download("small", log) for log in logs]
    try:
        wait_until(
            lambda: sum(WAITING in log.read_text(encoding="utf8") for log in logs) == 2,
            "two processes wait for the one that downloads",
        )
        hub_environment.release.set()
        returncodes = [process.wait(timeout=TIMEOUT_S) for process in processes]
    finally:
        for process in processes:
            process.kill()
    outputs = [log.read_text(encoding="utf8") for log in logs]
    assert returncodes == [0, 0, 0], outputs
    assert all("small is ready in" in output and output.count(WAITING) <= 1 for output in outputs), outputs
    model = find_published_model("small")
    assert sorted(hub_environment.requests) == sorted(
        (f"/models/elmo/{url.split('/models/elmo/')[1]}", None) for url in model.urls
    )
    layers = BiLM.load(tmp_path / "cache" / "small" / "model").embed_sentences(SENTENCE)[0]
    assert np.array_equal(layers, expected_layers(tmp_path / "served" / "small"))


@pytest.mark.slow
def test_a_process_killed_mid_download_leaves_no_stale_lock_and_the_next_one_resumes(
    hub_environment, tmp_path
):
    _, weights = hub_environment.publish("small", tmp_path / "served")
    hub_environment.hold_after = 2000  # the options file comes whole, the weights stop at 2,000 bytes
    partial = partial_path(
        tmp_path / "cache" / "small" / file_name(find_published_model("small").weights_url)
    )
    process = start_download("small", tmp_path / "killed.log")
    try:
        wait_until(lambda: partial.is_file() and partial.stat().st_size == 2000, "the download is half-way")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=TIMEOUT_S)
    hub_environment.release.set()
    model_dir = published_model_dir("small")  # waits for no lock: the killed process's went with it
    assert hub_environment.requests[-1] == (hub_environment.requests[-2][0], "bytes=2000-")
    assert (
        tmp_path / "cache" / "small" / file_name(find_published_model("small").weights_url)
    ).read_bytes() == (weights)
    layers = BiLM.load(model_dir).embed_sentences(SENTENCE)[0]
    assert np.array_equal(layers, expected_layers(tmp_path / "served" / "small"))


def test_installs_of_two_names_at_once_keep_both_index_entries(hub_environment, tmp_path):
    for name in ("small", "medium"):
        hub_environment.publish(name, tmp_path / "served")
    hub_environment.hold_after = 100
    errors: list[BaseException] = []

    def install(name: str) -> None:
        try:
            published_model_dir(name)
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=install, args=(name,)) for name in ("small", "medium")]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(hub_environment.requests) == 2, "both installs are downloading")
    hub_environment.release.set()
    for thread in threads:
        thread.join(timeout=TIMEOUT_S)
    assert errors == []
    index = json.loads((tmp_path / "cache" / "index.json").read_text(encoding="utf8"))
    assert sorted(index["converted"]) == ["medium", "small"] and len(index["files"]) == 4


def test_a_conversion_killed_half_way_leaves_nothing_the_next_run_uses(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    left_behind = tmp_path / "cache" / "small" / ".model.staging.4242"
    left_behind.mkdir(parents=True)
    (left_behind / "model.safetensors").write_bytes(b"half a file")
    model_dir = published_model_dir("small")
    assert not left_behind.exists()
    assert sorted(path.name for path in model_dir.parent.iterdir() if path.is_dir()) == ["model"]


def test_a_converted_model_is_readable_by_other_users_as_the_umask_says(hub_environment, tmp_path):
    hub_environment.publish("small", tmp_path / "served")
    previous = os.umask(0o022)
    try:
        model_dir = published_model_dir("small")
    finally:
        os.umask(previous)
    assert model_dir.stat().st_mode & 0o777 == 0o755
    assert {path.stat().st_mode & 0o777 for path in model_dir.iterdir()} == {0o644}


SHARED_GROUP = 60000
USERS = (60001, 60002)
"""Two users without accounts (any uid works for `os.setuid`) and the group they share."""


def as_user(uid: int, work: Callable[[], object]) -> str:
    """Run `work` in a child forked as `uid` of `SHARED_GROUP` with `umask 002`; its error, or ""."""
    context = multiprocessing.get_context("fork")
    results = context.SimpleQueue()

    def run() -> None:
        os.setgroups([])
        os.setgid(SHARED_GROUP)
        os.setuid(uid)
        os.umask(0o002)
        try:
            work()
            results.put("")
        except BaseException as error:  # noqa: BLE001 - reported to the test's process
            results.put(f"{type(error).__name__}: {error}")

    child = context.Process(target=run)
    child.start()
    child.join(timeout=TIMEOUT_S)
    assert child.exitcode == 0, f"uid {uid}'s process ended with {child.exitcode}"
    return results.get()


@pytest.fixture()
def shared_folder() -> Iterator[Path]:
    """A folder every user may write in (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="spacy-elmo-users-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run processes as two other users")
def test_a_cache_one_user_made_with_umask_002_is_used_and_extended_by_another(
    shared_folder, tmp_path, monkeypatch
):
    """User 1 installs `eu`; user 2, in the same group, takes the locks user 1 made (the model's and
    the index's) to use `eu` and to install `ta`. Lock files made 0o644 whatever the umask (as
    filelock 3.12 to 3.23 made them) leave user 2 unable to take them."""
    from ..bilm.random_weights import write_random_elmo

    for name in ("eu", "ta"):
        made = write_random_elmo(shared_folder / "made" / name)
        for url, path in zip(find_published_model(name).urls, made):
            served = shared_folder / "mirror" / mirror_path(url)
            served.parent.mkdir(parents=True, exist_ok=True)
            path.rename(served)
    monkeypatch.setenv("SPACY_ELMO_MIRROR", (shared_folder / "mirror").as_uri())

    def use_and_extend() -> None:
        BiLM.load(published_model_dir("eu")).embed_sentences(SENTENCE)
        BiLM.load(published_model_dir("ta")).embed_sentences(SENTENCE)

    # once as root in a cache of its own: every module the work imports is loaded before the
    # forks (the other users cannot read this interpreter's standard library under /root)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "warm-up"))
    use_and_extend()
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(shared_folder / "cache"))
    assert as_user(USERS[0], lambda: published_model_dir("eu")) == ""
    locks = list((shared_folder / "cache").rglob("*.lock"))
    assert locks and all(lock.stat().st_mode & 0o777 == 0o664 for lock in locks), locks
    assert as_user(USERS[1], use_and_extend) == ""
    owners = {path.stat().st_uid for path in (shared_folder / "cache").rglob("*") if path.is_file()}
    assert owners == set(USERS)
