"""Safe extraction of a downloaded archive: ELMoForManyLangs models come as a zip, or a `.tar.bz2`.

The standard library extracts (`tarfile` with its `"data"` filter, `zipfile` with its own name
cleaning). Our check of every member runs first and does more than either: an absolute path, a
drive letter, a `..` component, a link (even one that stays inside the folder) or anything else
than a file or folder rejects the whole archive before anything is written, where `zipfile`
would rewrite such a name and the `"data"` filter would stop midway or keep an inner link.
"""

from __future__ import annotations

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


def check_members(archive: Path, members: list[tuple[str, bool]]) -> None:
    """Refuse the archive unless every member, given as (name, is a plain file or folder), stays
    inside the folder and is no link or special file."""
    for name, is_plain in members:
        safe_member_path(name, archive)
        if not is_plain:
            raise HubError(
                f"{archive} holds {name!r}, which is a link or a special file: the archive is not "
                "extracted. Delete it, and check where it came from."
            )


def damaged(archive: Path, error: BaseException) -> HubError:
    """The error for an archive with a member that cannot be read."""
    return HubError(
        f"{archive}: a member cannot be read ({error}): delete the archive and run again to download "
        "it afresh."
    )


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
        # the file type sits in the high bits of external_attr; 0 where the archiver gave none
        plain = (0, stat.S_IFREG, stat.S_IFDIR)
        check_members(
            archive,
            [(info.filename, stat.S_IFMT(info.external_attr >> 16) in plain) for info in handle.infolist()],
        )
        try:
            handle.extractall(target)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as error:
            raise damaged(archive, error) from None


def extract_tar(archive: Path, target: Path) -> None:
    """Extract every file of the tar archive `archive` (any compression) under `target` (created),
    after checking every member."""
    try:
        handle = tarfile.open(archive, "r:*")
        infos = handle.getmembers()  # reads the whole archive: a damaged one fails here
    except (tarfile.TarError, EOFError, OSError) as error:
        raise unreadable(archive, "tar", error) from None
    with handle:
        check_members(archive, [(info.name, info.isfile() or info.isdir()) for info in infos])
        try:
            handle.extractall(target, members=infos, filter="data")
        except (tarfile.TarError, EOFError) as error:
            raise damaged(archive, error) from None


def extract_archive(archive: Path, target: Path) -> None:
    """Extract a `.zip` or a tar archive (`.tar.bz2`, `.tar.gz`, ...) safely under `target`."""
    if archive.suffix == ".zip":
        extract_zip(archive, target)
    else:
        extract_tar(archive, target)
