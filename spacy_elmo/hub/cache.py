"""Where published biLMs are kept, and the index of the sha256 of every file installed there.

Layout under the cache root (`$SPACY_ELMO_CACHE`, else the platform's user cache + `spacy-elmo`):

    index.json                 sha256 of each downloaded file and of each file of each model
                               directory, as first installed; what each model was converted from
    <name>/<options file>      as downloaded (the name in its URL)
    <name>/<weights file>      as downloaded
    <name>/model/              our model directory, converted once from the two files
    <name>/installed.json      where <name> was, and the size, mtime and inode of each of its
                               files, when they were last checked against the index
    .locks/<name>.lock         held while one process installs or checks <name>
    .locks/index.lock          held while one process reads and rewrites index.json

The locks are `filelock` locks (an OS lock on an open file): the OS releases them when their
process ends, however it ends, so a killed process leaves no stale lock behind.

A model is hashed when it is installed, not each time it is used: `installed.json` records its
files' sizes, modification times and inodes, and its folder's path, once they are checked, and a
later use that finds all of them as recorded takes the model without a lock and without reading
a file (as huggingface_hub trusts its snapshots). Anything missing or changed (a file rewritten or
touched, the cache copied or moved to another folder) sends it the locked way, which hashes every
file again and compares it with the index: a downloaded file that differs is fetched again, a
model directory that differs is converted again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..bilm.io.atomic import atomic_write_text
from .errors import HubError

logger = logging.getLogger(__name__)

INDEX_FILE = "index.json"
INDEX_VERSION = 1
CONVERTED_FOLDER = "model"
LOCKS_FOLDER = ".locks"
INDEX_LOCK = "index"
INSTALLED_FILE = "installed.json"


def model_folder(root: Path, name: str) -> Path:
    """The folder of one published model's downloaded files."""
    return root / name


def converted_folder(root: Path, name: str) -> Path:
    """One published model converted to our model directory."""
    return model_folder(root, name) / CONVERTED_FOLDER


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file, streamed (`hashlib.file_digest`)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def folder_checksums(folder: Path) -> dict[str, str]:
    """The sha256 of each file in `folder` (a model directory), by name."""
    return {path.name: file_sha256(path) for path in sorted(folder.iterdir()) if path.is_file()}


def installed_files(root: Path, name: str, sources: list[str]) -> list[str]:
    """The files of an installed model, relative to its folder: the downloaded `sources` and the
    files of its model directory."""
    converted = converted_folder(root, name)
    try:
        converted_files = sorted(path.name for path in converted.iterdir() if path.is_file())
    except OSError:
        converted_files = []
    return [*sources, *(f"{CONVERTED_FOLDER}/{file}" for file in converted_files)]


def installed_state(root: Path, name: str, sources: list[str]) -> dict[str, Any] | None:
    """Where a model's folder is, and [size, mtime in ns, inode] of each of its files; None if a
    downloaded file is missing. A copy or a move of the cache changes the path or the inodes."""
    folder = model_folder(root, name)
    try:
        stats = {
            file: [(info := (folder / file).stat()).st_size, info.st_mtime_ns, info.st_ino]
            for file in installed_files(root, name, sources)
        }
    except OSError:
        return None
    return {"folder": str(folder.resolve()), "files": stats}


def installed_model(root: Path, name: str, sources: list[str], required: list[str]) -> Path | None:
    """A model's directory, taken without a lock, if every file of the model (the downloaded
    `sources`, its directory's files) is where and as it was when last checked, and its `required`
    files are there; else None."""
    try:
        record = json.loads((model_folder(root, name) / INSTALLED_FILE).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return None
    converted = converted_folder(root, name)
    state = installed_state(root, name, sources)
    if state is None or record != state:
        return None
    return converted if all((converted / file).is_file() for file in required) else None


def record_installed(root: Path, name: str, sources: list[str]) -> None:
    """Note where the checked files are and their sizes, times and inodes (the model's lock is held)."""
    state = installed_state(root, name, sources)
    atomic_write_text(model_folder(root, name) / INSTALLED_FILE, json.dumps(state) + "\n")


@contextmanager
def cache_lock(root: Path, name: str) -> Iterator[None]:
    """Hold the cache's lock `name` (a model's name, or the index's), waiting for the process that
    holds it, and saying so once (a warning: it shows without any logging set up) when it has to wait."""
    folder = root / LOCKS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(folder / f"{name}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.warning("Waiting for another process that holds %s in %s.", name, root)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


class CacheIndex:
    """`index.json`: `files` maps `<name>/<file>` to its sha256 as first installed;
    `converted` maps a model name to the checksums of the files its model directory came from,
    and `model_files` to the checksum of each file of that directory as converted. All three
    are written together, once a model is installed: a download that forms no model (an error
    page served for a file) is never recorded as the file to match.

    Every read and every change runs under the index's lock; a change re-reads the file, applies
    itself and writes the whole file atomically, so processes that install different models at
    once keep each other's entries, and a reader never sees half a file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / INDEX_FILE

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"format_version": INDEX_VERSION, "files": {}, "converted": {}}
        try:
            document = json.loads(self.path.read_text(encoding="utf8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise HubError(
                f"{self.path} is not valid JSON ({error}): delete it, and the cache checks and "
                "records its files again."
            ) from None
        if not isinstance(document, dict) or document.get("format_version") != INDEX_VERSION:
            raise HubError(
                f"{self.path} is not a spacy-elmo cache index of version {INDEX_VERSION}: delete it."
            )
        return document

    def _lookup(self, section: str, key: str) -> Any:
        with cache_lock(self.root, INDEX_LOCK):
            return self._read().get(section, {}).get(key)

    def recorded_sha256(self, name: str, file: str) -> str | None:
        """The sha256 recorded for a downloaded file of model `name`, None if it has none yet."""
        return self._lookup("files", f"{name}/{file}")

    def converted_from(self, name: str) -> dict[str, str] | None:
        """The checksums of the files a model's directory was converted from, if converted."""
        return self._lookup("converted", name)

    def model_files(self, name: str) -> dict[str, str] | None:
        """The checksum of each file of a model's directory as converted, if recorded."""
        return self._lookup("model_files", name)

    def record_install(self, name: str, sources: dict[str, str], model_files: dict[str, str]) -> None:
        """Record, in one write, that a model was installed from downloaded files with the
        checksums `sources` into a directory whose files have the checksums `model_files`."""
        with cache_lock(self.root, INDEX_LOCK):
            document = self._read()
            files = document.setdefault("files", {})
            files.update({f"{name}/{file}": sha256 for file, sha256 in sources.items()})
            document.setdefault("converted", {})[name] = sources
            document.setdefault("model_files", {})[name] = model_files
            atomic_write_text(self.path, json.dumps(document, indent=2, sort_keys=True) + "\n")
