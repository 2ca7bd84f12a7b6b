"""Atomic file writes: write beside the target under a temporary name, then rename over it.

A reader (or a resumed run after `kill -9`) sees either the old file or the complete new one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save_file


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path next to `target`; on success it replaces `target` atomically."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    temporary = Path(temporary_name)
    try:
        yield temporary
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.chmod(temporary, 0o666 & ~_current_umask())  # mkstemp made it private (0600)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def atomic_write_text(target: Path, text: str) -> None:
    """Write a UTF-8 text file atomically."""
    with atomic_path(target) as temporary:
        temporary.write_text(text, encoding="utf8")


def atomic_save_tensors(target: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write a safetensors file atomically; the tensors are copied to the CPU, contiguous."""
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in tensors.items()}
    with atomic_path(target) as temporary:
        save_file(tensors, str(temporary), metadata={"format": "pt"})


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
