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
            f"Wrote {self.rows:,} rows ({self.tokens:,} tokens) to {self.output} in {self.seconds:.1f} s: "
            f"{rate:,.1f} tokens/s {self.where}."
        )
