"""The progress bar of a corpus run: the input's bytes done out of its size (known from the file
listing, so nothing is read ahead to count rows), with rows per second beside it."""

from __future__ import annotations

import time
from typing import Any, TextIO

from tqdm import tqdm

from ..corpus.sources import Corpus


class RunProgress:
    """Fed the writers' receipts (a pyarrow table: file, block, rows, tokens, bytes)."""

    def __init__(self, corpus: Corpus, parts_done_before: int, file: TextIO | None = None) -> None:
        described = f"{len(corpus.files)} file{'s' if len(corpus.files) != 1 else ''}"
        if parts_done_before:
            described += f", resumed after {parts_done_before:,} blocks"
        self.bar = tqdm(
            total=corpus.total_bytes,
            unit="B",
            unit_scale=True,
            desc=f"embedding ({described})",
            file=file,
            disable=None,  # on a terminal only: no bar in a log file
        )
        self.rows = 0
        self.started = time.perf_counter()

    def update(self, receipts: Any) -> None:
        self.rows += sum(receipts.column("rows").to_pylist())
        self.bar.update(sum(receipts.column("bytes").to_pylist()))
        rate = self.rows / max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix_str(f"{self.rows:,} rows, {rate:,.1f} rows/s", refresh=False)

    def close(self) -> None:
        self.bar.close()
