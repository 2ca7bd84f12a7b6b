"""Where a corpus is: a file, a folder of files, a glob, or a URI of any filesystem pyarrow knows
(`file://`, `s3://`, `gs://`, `hdfs://`), listed without reading a byte of it.

The listing gives each file's size (for a progress bar in bytes), its modification time, and
its kind, from its suffix in any case: `.parquet` Parquet, `.jsonl`, `.ndjson` or `.json` JSON
lines, anything else text. A folder's files are taken recursively in name order, and must all be
of one kind. Names that start with `.` or `_` (`_SUCCESS` markers, `.crc` files, unfinished runs)
are skipped in a folder and by a glob alike, unless the glob's own pattern starts with one. On a
local disk a folder's symbolic links are followed, but never into a folder already walked (a link
loop such as `ln -s . me`), and each real file is listed once.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..bilm.errors import InputError

TEXT, JSONL, PARQUET = "text", "jsonl", "parquet"
SUFFIX_KINDS = {".parquet": PARQUET, ".jsonl": JSONL, ".ndjson": JSONL, ".json": JSONL}
GLOB_CHARACTERS = "*?["


@dataclass(frozen=True)
class CorpusFile:
    """One file of a corpus: `path` on `filesystem` (a `pyarrow.fs.FileSystem`), `name` relative
    to the corpus root (as errors and text ids name it), `size` in bytes (None for a pipe),
    `modified` its modification time in nanoseconds (None where the filesystem gives none)."""

    filesystem: Any
    path: str
    name: str
    size: int | None
    kind: str
    modified: int | None = None


@dataclass(frozen=True)
class Corpus:
    """The files of one input, in a fixed order; `location` as the user gave it, `folder` the
    folder it names (None for a file or a glob)."""

    location: str
    files: tuple[CorpusFile, ...]
    folder: str | None = None

    @property
    def kind(self) -> str:
        return self.files[0].kind

    @property
    def total_bytes(self) -> int | None:
        sizes = [file.size for file in self.files]
        return None if None in sizes else sum(sizes)  # type: ignore[arg-type]

    @property
    def is_local(self) -> bool:
        import pyarrow.fs

        return isinstance(self.files[0].filesystem, pyarrow.fs.LocalFileSystem)

    def fingerprint(self) -> list[dict[str, Any]]:
        """Each file's name, size, kind and modification time: what a resumed run checks is still
        the same input (a file rewritten, even at the same size, has changed)."""
        return [
            {"name": file.name, "size": file.size, "kind": file.kind, "modified": file.modified}
            for file in self.files
        ]

    def normalized_location(self) -> str:
        """The location however it was spelled (`big`, `./big/`, its absolute path): a local
        one as an absolute path, a URI without a trailing slash."""
        if "://" in self.location:
            return self.location.rstrip("/")
        return os.path.abspath(self.location)


def kind_of(name: str, forced: str | None = None) -> str:
    if forced is not None:
        return forced
    return SUFFIX_KINDS.get(posixpath.splitext(name)[1].lower(), TEXT)


def filesystem_of(location: str) -> tuple[Any, str]:
    """(`pyarrow.fs.FileSystem`, path on it): a URI by its scheme, anything else a local path."""
    import pyarrow
    import pyarrow.fs

    if "://" not in location:
        return pyarrow.fs.LocalFileSystem(), str(Path(location).absolute())
    try:
        return pyarrow.fs.FileSystem.from_uri(location)
    except (pyarrow.ArrowException, ValueError) as error:
        raise InputError(
            f"Cannot open {location}: {error}. Give a local path or a URI that pyarrow reads (file://, "
            's3://, gs://, hdfs://; cloud stores need their pyarrow support, e.g. pip install "pyarrow[s3]").'
        ) from None


def find_corpus(location: str | Path, *, kind: str | None = None, allow_stream: bool = False) -> Corpus:
    """The files of an input; `kind` overrides the suffixes. A pipe (`/dev/stdin`) is one file of
    unknown size where `allow_stream` (it can be read once, in order), else an error."""
    import pyarrow.fs

    location = str(location)
    filesystem, path = filesystem_of(location)
    if isinstance(filesystem, pyarrow.fs.LocalFileSystem) and is_stream(Path(path)):
        if not allow_stream:
            raise InputError(
                f"{location} is a pipe, which Ray's workers cannot read: save it to a file first, or use "
                "--engine local, which reads it once, in order."
            )
        return Corpus(location, (CorpusFile(filesystem, path, Path(path).name, None, kind_of(path, kind)),))
    folder = None
    if any(character in path for character in GLOB_CHARACTERS):
        infos = glob(filesystem, path)
        root = posixpath.dirname(path)
    else:
        info = filesystem.get_file_info(path)
        if info.type == pyarrow.fs.FileType.NotFound:
            raise InputError(f"Input {location} does not exist.")
        if info.type == pyarrow.fs.FileType.File:
            infos, root = [info], posixpath.dirname(path)
        else:
            infos, root = folder_files(filesystem, path), path
            folder = path
    files = tuple(
        CorpusFile(
            filesystem,
            info.path,
            posixpath.relpath(info.path, root),
            info.size,
            kind_of(info.path, kind),
            info.mtime_ns,
        )
        for info in infos
    )
    if not files:
        raise InputError(f"Input {location} holds no files: give a file, a folder of files or a glob.")
    kinds = sorted({file.kind for file in files})
    if len(kinds) > 1:
        examples = ", ".join(next(file.name for file in files if file.kind == found) for found in kinds)
        raise InputError(
            f"Input {location} mixes kinds of files ({', '.join(kinds)}: {examples}): give one kind, or "
            "name the kind with --input-format."
        )
    return Corpus(location, files, folder)


def is_stream(path: Path) -> bool:
    """A pipe, FIFO or character device (`/dev/stdin`): readable once, not seekable."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def visible(name: str) -> bool:
    return not any(part.startswith((".", "_")) for part in name.split("/"))


def folder_files(filesystem: Any, folder: str) -> list[Any]:
    """The visible files under `folder`, in path order."""
    import pyarrow.fs

    if isinstance(filesystem, pyarrow.fs.LocalFileSystem):
        infos = filesystem.get_file_info(local_folder_files(folder))
    else:
        infos = filesystem.get_file_info(pyarrow.fs.FileSelector(folder, recursive=True))
    return sorted(
        (
            info
            for info in infos
            if info.type == pyarrow.fs.FileType.File and visible(posixpath.relpath(info.path, folder))
        ),
        key=lambda info: info.path,
    )


def local_folder_files(folder: str) -> list[str]:
    """The paths of the visible files under a local `folder`, through symbolic links but never
    into a folder already walked (a link loop would list its files once per level, 40 levels
    deep), and each real file once (the first path in name order names it)."""
    walked = {os.path.realpath(folder)}
    seen: set[str] = set()
    paths = []
    for top, folders, names in os.walk(folder, followlinks=True):
        kept = []
        for name in sorted(folders):
            real = os.path.realpath(os.path.join(top, name))
            if visible(name) and real not in walked:
                walked.add(real)
                kept.append(name)
        folders[:] = kept
        for name in sorted(names):
            real = os.path.realpath(os.path.join(top, name))
            if visible(name) and real not in seen:
                seen.add(real)
                paths.append(os.path.join(top, name))
    return paths


def glob(filesystem: Any, pattern: str) -> list[Any]:
    """Files matching a pattern in its last path component (`shards/part-*.jsonl`); names that
    start with `.` or `_` only where the pattern does too (`shards/.*.txt`), as a folder skips them."""
    import pyarrow.fs

    folder, name_pattern = posixpath.split(pattern)
    if any(character in folder for character in GLOB_CHARACTERS):
        raise InputError(f"{pattern}: a glob may only match names in one folder (the last part of the path).")
    try:
        infos = filesystem.get_file_info(pyarrow.fs.FileSelector(folder))
    except FileNotFoundError:
        raise InputError(f"Input {pattern}: the folder {folder} does not exist.") from None
    return sorted(
        (
            info
            for info in infos
            if info.type == pyarrow.fs.FileType.File
            and fnmatch.fnmatchcase(info.base_name, name_pattern)
            and (visible(info.base_name) or not visible(name_pattern))
        ),
        key=lambda info: info.path,
    )
