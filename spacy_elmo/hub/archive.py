"""Safe extraction of a downloaded archive: ELMoForManyLangs models come as a zip, or a `.tar.bz2`.

Every member is checked before anything is written: an absolute path, a drive letter, a `..`
component, a link or anything else than a file or folder rejects the whole archive, so nothing
is written outside the target folder. Members are copied one by one (no `extractall`).
"""

from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

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


def extract_zip(archive: Path, target: Path) -> None:
    """Extract every file of `archive` under `target` (created), after checking every member."""
    try:
        handle = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as error:
        raise HubError(
            f"{archive} is not a readable zip archive ({error}): delete it and run again to "
            "download it afresh."
        ) from None
    with handle:
        members = handle.infolist()
        for member in members:
            safe_member_path(member.filename, archive)
            file_type = stat.S_IFMT(member.external_attr >> 16)  # 0 where the archiver gave none
            if file_type not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise HubError(
                    f"{archive} holds {member.filename!r}, which is a link or a special file: the "
                    "archive is not extracted. Delete it, and check where it came from."
                )
        target.mkdir(parents=True, exist_ok=True)
        for member in members:
            destination = target.joinpath(*safe_member_path(member.filename, archive).parts)
            if member.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                with handle.open(member) as source, open(destination, "wb") as sink:
                    shutil.copyfileobj(source, sink, length=1 << 20)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as error:
                raise HubError(
                    f"{archive}: member {member.filename!r} cannot be read ({error}): delete the "
                    "archive and run again to download it afresh."
                ) from None


def extract_tar(archive: Path, target: Path) -> None:
    """Extract every file of the tar archive `archive` (any compression) under `target` (created),
    after checking every member."""
    try:
        handle = tarfile.open(archive, "r:*")
        members = handle.getmembers()
    except (tarfile.TarError, EOFError, OSError) as error:
        raise HubError(
            f"{archive} is not a readable tar archive ({error}): delete it and run again to "
            "download it afresh."
        ) from None
    with handle:
        for member in members:
            safe_member_path(member.name, archive)
            if not (member.isfile() or member.isdir()):
                raise HubError(
                    f"{archive} holds {member.name!r}, which is a link or a special file: the "
                    "archive is not extracted. Delete it, and check where it came from."
                )
        target.mkdir(parents=True, exist_ok=True)
        for member in members:
            destination = target.joinpath(*safe_member_path(member.name, archive).parts)
            if member.isdir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            source = handle.extractfile(member)
            try:
                with source, open(destination, "wb") as sink:
                    shutil.copyfileobj(source, sink, length=1 << 20)
            except (tarfile.TarError, EOFError) as error:
                raise HubError(
                    f"{archive}: member {member.name!r} cannot be read ({error}): delete the "
                    "archive and run again to download it afresh."
                ) from None


def extract_archive(archive: Path, target: Path) -> None:
    """Extract a `.zip` or a tar archive (`.tar.bz2`, `.tar.gz`, ...) safely under `target`."""
    if archive.suffix == ".zip":
        extract_zip(archive, target)
    else:
        extract_tar(archive, target)
