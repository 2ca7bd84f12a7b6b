"""What a corpus run did, as the one line a command prints at its end."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunSummary:
    """Rows and tokens written to `output` in `seconds`; `where` says what ran it ("in 1 process")."""

    rows: int
    tokens: int
    seconds: float
    where: str
    output: str

    def line(self) -> str:
        rate = self.tokens / self.seconds if self.seconds else 0.0
        return (
            f"Wrote {counted(self.rows, 'row')} ({counted(self.tokens, 'token')}) to {self.output} in "
            f"{self.seconds:.1f} s: {rate:,.1f} tokens/s {self.where}."
        )


def counted(number: int, noun: str) -> str:
    """`1 row`, `2 rows`, `1,000 rows`."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"
