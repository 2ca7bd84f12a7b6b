"""The rules of every command that writes a corpus's output, on either engine: never over, or
around, one of its inputs, even with --force; a folder where a folder goes; an existing output is
replaced only with --force."""

from __future__ import annotations

import os
import posixpath
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..bilm.errors import ElmoError
from ..bilm.io.atomic import UNFINISHED
from .sources import Corpus


class OutputExistsError(ElmoError, FileExistsError):
    """A command would overwrite an existing output without --force."""


class OutputPathError(ElmoError, ValueError):
    """An output path is, holds or lies inside one of the command's inputs, or is a file where a
    folder goes (or back)."""


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it (paths as the filesystem spells them)."""
    folder = folder.rstrip("/")
    return path == folder or path.startswith(folder + "/")


def check_not_input(output: str, corpus: Corpus, *, local: bool = True) -> None:
    """`output` may be neither an input file nor a folder holding one, nor lie in an input folder
    (the next run over that folder would read it); on a local disk, through symbolic links too."""
    given = posixpath.normpath(output)
    check_paths_apart(given, corpus)
    if local and corpus.files and corpus.is_local:
        real = os.path.realpath(output)
        check_paths_apart(real, real_paths(corpus), named=given if real != given else None)


def check_paths_apart(output: str, corpus: Corpus, *, named: str | None = None) -> None:
    """`check_not_input` on paths as given; `named`: the output as the user gave it, where
    `output` is what it resolves to through links."""
    shown = output if named is None else f"{named} (through links {output})"
    for file in corpus.files:
        if inside(file.path, output):
            what = "is" if file.path == output else "holds"
            raise OutputPathError(
                f"The output {shown} {what} the input file {file.path}: writing it (or --force) would "
                "destroy the input. Give another output path."
            )
    if corpus.folder is not None and inside(output, corpus.folder):
        raise OutputPathError(
            f"The output {shown} lies inside the input folder {corpus.folder}: the next run over that "
            "folder would read it as input. Give an output path outside it."
        )


def check_not_model(output: str, model_folder: Path) -> None:
    """`output` may neither lie in nor hold the folder of the model the run reads (its weights, a
    pipeline's config), even with --force, on a local disk through symbolic links too."""
    real_output, real_model = os.path.realpath(output), os.path.realpath(model_folder)
    if inside(real_output, real_model) or inside(real_model, real_output):
        where = "lies inside" if inside(real_output, real_model) else "holds"
        where = "is" if real_output == real_model else where
        raise OutputPathError(
            f"The output {output} {where} the model {model_folder}: writing it (or --force) would destroy "
            "the model. Give an output path outside it."
        )


def real_paths(corpus: Corpus) -> Corpus:
    """The corpus with every local path resolved through symbolic links."""
    files = tuple(replace(file, path=os.path.realpath(file.path)) for file in corpus.files)
    folder = None if corpus.folder is None else os.path.realpath(corpus.folder)
    return replace(corpus, files=files, folder=folder)


def check_corpus_output(filesystem: Any, output: str, corpus: Corpus, *, force: bool) -> None:
    """The Parquet folder `output` of a corpus run, before any work starts."""
    import pyarrow.fs

    local = isinstance(filesystem, pyarrow.fs.LocalFileSystem)
    check_not_input(output, corpus, local=local)
    if local:
        check_regular_file(Path(output))
    check_output_folder(filesystem, output, force=force)
    if local:
        check_writable(Path(output).parent, output)
        if force and Path(output).is_dir():
            check_writable(Path(output), output)


def check_output_folder(filesystem: Any, output: str, *, force: bool) -> None:
    """`output` is no file, and is empty or absent unless `force`."""
    import pyarrow.fs

    info = filesystem.get_file_info(output)
    if info.type == pyarrow.fs.FileType.File:
        raise OutputPathError(f"The output {output} is a file; it must be a folder: give a folder path.")
    if force or info.type == pyarrow.fs.FileType.NotFound:
        return
    if filesystem.get_file_info(pyarrow.fs.FileSelector(output)):
        raise OutputExistsError(
            f"{output} exists already: pass --force to overwrite it, or give another path."
        )


def check_local_output(output: Path, corpus: Corpus, *, force: bool) -> None:
    """The one output file of the local engine, before any work starts: apart from the inputs, a
    regular file (or nothing yet), replaced only with `force`."""
    check_not_input(str(output.absolute()), corpus)
    check_regular_file(output)
    if output.is_dir():
        raise OutputPathError(f"The output {output} is a directory; it must be a file: give a file path.")
    if output.exists() and not force:
        raise OutputExistsError(
            f"{output} exists already: pass --force to overwrite it, or give another path."
        )
    check_writable(output.parent, str(output))


def check_writable(folder: Path, output: str) -> None:
    """A file can be made and deleted in `folder` (made if missing), where `output` goes: found
    before any work starts, not once the whole run is computed (a read-only or immutable folder,
    a full disk's quota, a folder of another user)."""
    in_the_way = [path for path in (folder, *folder.parents) if os.path.lexists(path) and not path.is_dir()]
    if in_the_way:
        what = "a file" if in_the_way[0].exists() else "a symbolic link to nothing"
        raise OutputPathError(
            f"Cannot write the output {output}: {in_the_way[0]} is {what}, not a folder. Give an output "
            "in a folder."
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".spacy-elmo-probe-"):
            pass  # made, and deleted as it closes
    except OSError as error:
        raise OutputPathError(
            f"Cannot write the output {output}: {error.strerror or error} in {folder}. Make {folder} "
            "writable, or give an output in a folder you can write."
        ) from None


def check_regular_file(path: Path) -> None:
    """Outputs are written whole under a temporary name and then renamed over `path`: a device,
    a FIFO or a socket there would be replaced by a file (`/dev/null` run as root), so it is
    refused, with or without --force."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        what = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device or socket, not a file"
        raise OutputPathError(
            f"The output {path} is {what}: spacy-elmo writes an output whole under a temporary name and "
            "then moves it into place, which would replace it. Give the path of a regular file."
        )


class OutputClaimedError(ElmoError, RuntimeError):
    """Another process is writing the same output."""


@contextmanager
def claimed_output(path: Path) -> Iterator[None]:
    """Hold `path` for this process while it is written (a lock on `.NAME.lock` beside it, which
    the system releases when the process ends, however it ends): a second command writing the
    same output is refused at once instead of silently replacing the first one's result."""
    from filelock import FileLock, Timeout

    lock_path = path.with_name(f".{path.name}.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise OutputClaimedError(
            f"Another spacy-elmo command is writing {path} now: wait for it to end, or write to another path."
        ) from None
    UNFINISHED.add(lock_path)
    try:
        yield
    finally:
        lock_path.unlink(missing_ok=True)  # before the release: a waiting process never sees it gone
        UNFINISHED.discard(lock_path)
        lock.release()
