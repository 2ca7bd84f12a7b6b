"""Atomic file writes: write beside the target under a temporary name, then rename over it.

A reader (or a resumed run after `kill -9`) sees either the old file or the complete new one.
A temporary file's name carries its writer's process id: one left by a process that no longer
lives (killed with SIGKILL, a machine that lost power) is removed by the next write of the same
target.
The temporary file is created with mode 0o666 less the umask, as the kernel applies it, and the
result gets that mode again after writing (a writer such as safetensors may replace the file
with a private one), so it has the permissions of any new file. The umask is read that way,
never set: setting it would race with other threads creating files.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# files of this process's writes in progress: temporaries, and the locks that claim outputs
UNFINISHED: set[Path] = set()


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path next to `target`; on success it replaces `target` atomically."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    temporary = _create_beside(target)
    new_file_mode = stat.S_IMODE(temporary.stat().st_mode)
    UNFINISHED.add(temporary)
    try:
        yield temporary
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.chmod(temporary, new_file_mode)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
        UNFINISHED.discard(temporary)


def remove_unfinished() -> None:
    """Remove the temporary files (and claims) of writes still in progress: what a process that is
    being stopped (SIGTERM) leaves behind otherwise."""
    for path in list(UNFINISHED):
        with contextlib.suppress(OSError):
            path.unlink()


def atomic_write_text(target: Path, text: str) -> None:
    """Write a UTF-8 text file atomically."""
    with atomic_path(target) as temporary:
        temporary.write_text(text, encoding="utf8")


def atomic_save_tensors(target: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write a safetensors file atomically; the tensors are copied to the CPU, contiguous."""
    from safetensors.torch import save_file  # here: the command line's other paths need no torch

    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in tensors.items()}
    with atomic_path(target) as temporary:
        save_file(tensors, str(temporary), metadata={"format": "pt"})


def new_folder(folder: Path) -> Path:
    """Make `folder` afresh (a leftover of that name is removed first) with the permissions of
    the umask, as `mkdir` makes folders: unlike `tempfile.mkdtemp`'s private ones, a folder
    renamed into place from it stays readable by whoever may read its parent."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def remove_stale_temporaries(target: Path) -> None:
    """Remove `target`'s temporary files whose writers no longer run on this machine."""
    for temporary in target.parent.glob(f".{glob_escape(target.name)}.*-*.tmp"):
        pid = temporary.name[len(target.name) + 2 :].split("-", 1)[0]
        if pid.isdigit() and not process_exists(int(pid)):
            temporary.unlink(missing_ok=True)


def glob_escape(name: str) -> str:
    return "".join(f"[{character}]" if character in "*?[" else character for character in name)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _create_beside(target: Path) -> Path:
    """A new empty file `.NAME.PID-RANDOM.tmp` next to `target`, mode 0o666 less the umask."""
    for _ in range(100):
        temporary = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return temporary
    raise FileExistsError(f"Cannot create a temporary file next to {target}: 100 names were taken.")
