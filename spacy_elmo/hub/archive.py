"""Safe extraction of a downloaded archive: ELMoForManyLangs models come as a zip, or a `.tar.bz2`.

Every member is checked before anything is written: an absolute path, a drive letter, a `..`
component, a link or anything else than a file or folder rejects the whole archive, so nothing
is written outside the target folder. Members are copied one by one (no `extractall`).
"""

from __future__ import annotations

import functools
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from .errors import HubError


def safe_member_path(name: str, archive: Path) -> PurePosixPath:
    """The relative path a member may be written to; `HubError` if it would leave the target."""
    normalised = name.replace("\\", "/")
    path = PurePosixPath(normalised)
    first = path.parts[0] if path.parts else ""
    if not path.parts or path.is_absolute() or ".." in path.parts or first.endswith(":") or "\x00" in name:
        raise HubError(
            f"{archive} holds the member {name!r}, which would be written outside the folder it is "
            "extracted to: the archive is not extracted. Delete it, and check where it came from."
        )
    return path


@dataclass(frozen=True)
class Member:
    """One entry of an archive, whatever its format: its name, whether it is a folder, whether it
    is a plain file or folder (not a link or a special file), and how to read its bytes."""

    name: str
    is_dir: bool
    is_plain: bool
    open: Callable[[], IO[bytes]]


def extract_members(
    archive: Path, target: Path, members: list[Member], read_errors: tuple[type[BaseException], ...]
) -> None:
    """Check every member, then copy each under `target` (created); `read_errors` are what the
    format raises for a damaged member."""
    for member in members:
        safe_member_path(member.name, archive)
        if not member.is_plain:
            raise HubError(
                f"{archive} holds {member.name!r}, which is a link or a special file: the "
                "archive is not extracted. Delete it, and check where it came from."
            )
    target.mkdir(parents=True, exist_ok=True)
    for member in members:
        destination = target.joinpath(*safe_member_path(member.name, archive).parts)
        if member.is_dir:
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            with member.open() as source, open(destination, "wb") as sink:
                shutil.copyfileobj(source, sink, length=1 << 20)
        except read_errors as error:
            raise HubError(
                f"{archive}: member {member.name!r} cannot be read ({error}): delete the "
                "archive and run again to download it afresh."
            ) from None


def unreadable(archive: Path, kind: str, error: BaseException) -> HubError:
    """The error for an archive that cannot be opened at all."""
    return HubError(
        f"{archive} is not a readable {kind} archive ({error}): delete it and run again to download "
        "it afresh."
    )


def extract_zip(archive: Path, target: Path) -> None:
    """Extract every file of `archive` under `target` (created), after checking every member."""
    try:
        handle = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as error:
        raise unreadable(archive, "zip", error) from None
    with handle:
        members = [
            Member(
                info.filename,
                info.is_dir(),
                # the file type sits in the high bits of external_attr; 0 where the archiver gave none
                stat.S_IFMT(info.external_attr >> 16) in (0, stat.S_IFREG, stat.S_IFDIR),
                functools.partial(handle.open, info),
            )
            for info in handle.infolist()
        ]
        extract_members(archive, target, members, (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError))


def extract_tar(archive: Path, target: Path) -> None:
    """Extract every file of the tar archive `archive` (any compression) under `target` (created),
    after checking every member."""
    try:
        handle = tarfile.open(archive, "r:*")
        infos = handle.getmembers()  # reads the whole archive: a damaged one fails here
    except (tarfile.TarError, EOFError, OSError) as error:
        raise unreadable(archive, "tar", error) from None
    with handle:
        members = [
            Member(
                info.name,
                info.isdir(),
                info.isfile() or info.isdir(),
                functools.partial(handle.extractfile, info),
            )
            for info in infos
        ]
        extract_members(archive, target, members, (tarfile.TarError, EOFError))


def extract_archive(archive: Path, target: Path) -> None:
    """Extract a `.zip` or a tar archive (`.tar.bz2`, `.tar.gz`, ...) safely under `target`."""
    if archive.suffix == ".zip":
        extract_zip(archive, target)
    else:
        extract_tar(archive, target)
