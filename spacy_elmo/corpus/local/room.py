"""Room for a file being written: the free space of its disk and the process's file size limit
(`ulimit -f`), checked before each block of writes. h5py cannot recover from a write that fails
(pages of HDF5 errors, then a crash at exit), so a write that would not fit is refused first."""

from __future__ import annotations

import resource
import shutil
from pathlib import Path

from ...bilm.errors import ElmoError

# what HDF5 adds to the vectors: each dataset's header and index, the file's own metadata
BYTES_PER_DATASET = 4096
BYTES_PER_FILE = 1 << 16


class NoRoomError(ElmoError, OSError):
    """The disk, or the file size limit, has no room for the rest of an output."""


def check_room(temporary: Path, output: Path, needed: int) -> None:
    """Refuse `needed` more bytes in `temporary` (the file that becomes `output`) where its disk,
    or the process's file size limit, has no room for them."""
    written = temporary.stat().st_size
    free = shutil.disk_usage(temporary.parent).free
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if needed > free:
        raise NoRoomError(
            f"No room to write {output}: its disk has {size_text(free)} free, and the next lines need about "
            f"{size_text(needed)} more ({size_text(written)} written so far). Free some space, or write "
            "to another disk."
        )
    if limit != resource.RLIM_INFINITY and written + needed > limit:
        raise NoRoomError(
            f"No room to write {output}: this process may write files of {size_text(limit)} at most "
            f"(ulimit -f), and it needs more ({size_text(written)} written so far, the next lines about "
            f"{size_text(needed)}). Raise the limit, or give fewer lines."
        )


def size_text(n_bytes: int) -> str:
    """`n_bytes` for a person: in KB, MB or GB (of 1,000), or bytes."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:,.1f} {unit}"
    return f"{n_bytes:,} bytes"
