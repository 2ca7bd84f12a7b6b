"""What benchmarks feed and run beside the code they time: UD sentences and busy processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEXT_PREFIX = "# text = "


def ud_texts(conllu: Path, limit: int | None = None) -> list[str]:
    """The `# text = ...` sentences of a CoNLL-U file, the first `limit` of them (all: None)."""
    with open(conllu, encoding="utf8") as lines:
        texts = [line[len(TEXT_PREFIX) :].strip() for line in lines if line.startswith(TEXT_PREFIX)]
    return texts[:limit]


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` processes spinning on a core each (`while True: pass`) for the block."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(1.0 if count else 0.0)  # let the scheduler see them
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
