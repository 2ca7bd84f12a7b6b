"""Where published biLMs are kept, and the index of the sha256 of every file downloaded there.

Layout under the cache root (`$SPACY_ELMO_CACHE`, else the platform's user cache + `spacy-elmo`):

    index.json                 sha256 of each downloaded file; what each model was converted from
    <name>/<options file>      as downloaded (the name in its URL)
    <name>/<weights file>      as downloaded
    <name>/model/              our model directory, converted once from the two files
    <name>/installed.json      size and mtime of each downloaded file when it was last checked
    .locks/<name>.lock         held while one process installs or checks <name>
    .locks/index.lock          held while one process reads and rewrites index.json

The locks are `filelock` locks (an OS lock on an open file): the OS releases them when their
process ends, however it ends, so a killed process leaves no stale lock behind.

A model is hashed when it is installed, not each time it is used: `installed.json` records the
downloaded files' sizes and modification times once they are checked and converted, and a later
use that finds the same sizes and times and a complete model directory takes it without a lock
and without reading the files (as huggingface_hub trusts its snapshots). Anything missing or
changed sends it the locked way, which checks the files' sha256 again.
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


def source_stats(folder: Path, names: list[str]) -> dict[str, list[int]] | None:
    """[size, mtime in ns] of each downloaded file, None if one is missing."""
    try:
        return {name: [(info := (folder / name).stat()).st_size, info.st_mtime_ns] for name in names}
    except OSError:
        return None


def installed_model(root: Path, name: str, sources: list[str], required: list[str]) -> Path | None:
    """A model's directory, taken without a lock, if it was installed from the downloaded files
    `sources` as they are now (same sizes and times) and holds its `required` files; else None."""
    try:
        record = json.loads((model_folder(root, name) / INSTALLED_FILE).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return None
    converted = converted_folder(root, name)
    stats = source_stats(model_folder(root, name), sources)
    if stats is None or record.get("sources") != stats:
        return None
    return converted if all((converted / file).is_file() for file in required) else None


def record_installed(root: Path, name: str, sources: list[str]) -> None:
    """Note the checked files' sizes and times (the model's lock is held)."""
    stats = source_stats(model_folder(root, name), sources)
    atomic_write_text(model_folder(root, name) / INSTALLED_FILE, json.dumps({"sources": stats}) + "\n")


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
    """`index.json`: `files` maps `<name>/<file>` to its sha256 as first downloaded;
    `converted` maps a model name to the checksums of the files its model directory came from.

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
            return self._read()[section].get(key)

    def _store(self, section: str, key: str, value: Any) -> None:
        with cache_lock(self.root, INDEX_LOCK):
            document = self._read()
            document[section][key] = value
            atomic_write_text(self.path, json.dumps(document, indent=2, sort_keys=True) + "\n")

    def recorded_sha256(self, key: str) -> str | None:
        """The sha256 recorded for a downloaded file, None if it has none yet."""
        return self._lookup("files", key)

    def record_sha256(self, key: str, sha256: str) -> None:
        """Record a downloaded file's sha256."""
        self._store("files", key, sha256)

    def converted_from(self, name: str) -> dict[str, str] | None:
        """The checksums of the files a model's directory was converted from, if converted."""
        return self._lookup("converted", name)

    def record_conversion(self, name: str, sources: dict[str, str]) -> None:
        """Record that a model's directory was converted from files with these checksums."""
        self._store("converted", name, sources)
