"""What a corpus run did, as the one line a command prints at its end."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunSummary:
    """Rows and tokens written to `output`: `seconds` the whole run took (a cluster's start-up and
    the model's loading included), `embedding_seconds` the part of it spent computing the rows
    (the rate is of these); `where` says what ran it ("in 1 process")."""

    rows: int
    tokens: int
    seconds: float
    embedding_seconds: float
    where: str
    output: str

    def line(self) -> str:
        """`Wrote 1,000 rows (20,000 tokens) to OUT in 10.2 s (5.8 s embedding: 3,448 tokens/s)
        on 2 Ray workers.`"""
        rate = self.tokens / self.embedding_seconds if self.embedding_seconds else 0.0
        shown = f"{rate:,.0f}" if rate >= 10 else f"{rate:.1f}"  # a tiny run's rate is no 0
        return (
            f"Wrote {counted(self.rows, 'row')} ({counted(self.tokens, 'token')}) to {self.output} in "
            f"{self.seconds:.1f} s ({self.embedding_seconds:.1f} s embedding: {shown} tokens/s) "
            f"{self.where}."
        )


def counted(number: int, noun: str) -> str:
    """`1 row`, `2 rows`, `1,000 rows`."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"
