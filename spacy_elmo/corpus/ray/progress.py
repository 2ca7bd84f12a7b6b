"""The progress bar of a corpus run: the input's bytes done out of its size (known from the file
listing, so nothing is read ahead to count rows; unknown for a Dataset), with rows per second
beside it."""

from __future__ import annotations

import time
from typing import Any, TextIO

from tqdm import tqdm


class RunProgress:
    """Fed the writers' receipts (a pyarrow table: file, part, rows, tokens, bytes); counts the
    parts written (`parts`)."""

    def __init__(
        self, described: str, total_bytes: int | None, parts_done_before: int, file: TextIO | None = None
    ) -> None:
        if parts_done_before:
            described += f", resumed after {parts_done_before:,} parts"
        self.bar = tqdm(
            total=total_bytes,
            unit="B",
            unit_scale=True,
            desc=f"embedding ({described})",
            file=file,
            disable=None,  # on a terminal only: no bar in a log file
        )
        self.rows = self.parts = 0
        self.started = time.perf_counter()

    def update(self, receipts: Any) -> None:
        self.rows += sum(receipts.column("rows").to_pylist())
        self.parts += receipts.num_rows
        self.bar.update(sum(receipts.column("bytes").to_pylist()))
        rate = self.rows / max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix_str(f"{self.rows:,} rows, {rate:,.1f} rows/s", refresh=False)

    def close(self) -> None:
        self.bar.close()
