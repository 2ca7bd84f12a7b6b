"""The metrics log of a pretraining run: one JSON record per evaluation, and the progress bar's fields."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..bilm.io.atomic import atomic_write_text
from .config import TrainingSettings
from .schedule import latest_learning_rate

METRICS_FILE = "metrics.jsonl"


@dataclass
class Counters:
    """Progress that a checkpoint carries over (everything else is recomputed on resume)."""

    step: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0
    loss_sum: float = 0.0  # training loss summed since the last evaluation ...
    loss_steps: int = 0  # ... over this many steps
    history: list[dict[str, Any]] = field(default_factory=list)


def truncate_metrics(path: Path, step: int) -> None:
    """Drop records a killed run logged after its last checkpoint (and a torn last line)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record["step"] <= step:
            kept.append(line + "\n")
    atomic_write_text(path, "".join(kept))


def metrics_record(
    counters: Counters, epoch: int, tokens_per_s: float, sampled: bool, learning_rate: float
) -> dict[str, Any]:
    """Counters, the learning rate of the latest step and the mean training loss since the last
    record (a sampled-softmax loss is not a cross-entropy over the vocabulary: `train_perplexity`
    is measured separately, as dev's)."""
    train_loss = counters.loss_sum / counters.loss_steps if counters.loss_steps else None
    return {
        "step": counters.step,
        "epoch": epoch,
        "tokens": counters.tokens,
        "elapsed_s": round(counters.elapsed_s, 1),
        "tokens_per_s": round(tokens_per_s, 1),
        "learning_rate": learning_rate,
        "train_loss": train_loss,
        "train_loss_softmax": "sampled" if sampled else "full",
        "train_perplexity": None,
        "dev_perplexity": None,
    }


def progress_fields(
    loss: float, sampled: bool, tokens_per_s: float, counters: Counters, settings: TrainingSettings
) -> dict[str, str]:
    """tokens/s, loss, perplexity (training with a full softmax, else the last dev one), the
    learning rate when a schedule moves it, and the minutes left under `max_minutes`
    (`cap_left`; the bar's own estimate counts steps)."""
    fields = {"tok/s": f"{tokens_per_s:,.0f}", "loss": f"{loss:.3f}"}
    if not sampled:
        fields["ppl"] = f"{math.exp(loss):.1f}"
    dev = [record["dev_perplexity"] for record in counters.history if record["dev_perplexity"] is not None]
    if dev:
        fields["dev_ppl"] = f"{dev[-1]:.1f}"
    if settings.lr_schedule != "constant" or settings.warmup_steps:
        fields["lr"] = f"{latest_learning_rate(counters.step, settings):.3g}"
    if settings.max_minutes:
        fields["cap_left"] = f"{max(settings.max_minutes - counters.elapsed_s / 60, 0):.0f}min"
    return fields


@contextmanager
def paused(progress: tqdm) -> Iterator[None]:
    """Keep the time spent inside (an evaluation, a checkpoint) out of the bar's rate and time left.

    tqdm measures its rate over the time since its last print, so a 40-second evaluation would
    otherwise read as one very slow step (with a 60-second print interval in a log file, for a
    minute). The bar's elapsed time then counts training steps only; `left` keeps the wall clock.
    Inside, the bar's clock stands still, so a line written there (the evaluation's) redraws the
    bar as it was when the pause began, not with an elapsed time that drops back afterwards.

    tqdm's public `unpause()` is not enough: it moves the start by all the time since the last
    print, so with a 60-second print interval it also drops up to a minute of training steps from
    the elapsed time, and it cannot hold the clock still during the pause. Hence its two clock
    attributes are set here (tests/training/test_metrics.py pins the behaviour).
    """
    if progress.disable:  # a disabled bar (every rank but the first) has no clock at all
        yield
        return
    clock = progress._time
    started = clock()
    progress._time = lambda: started
    try:
        yield
    finally:
        progress._time = clock
        pause = clock() - started
        progress.start_t += pause
        progress.last_print_t += pause


def describe(record: dict[str, Any]) -> str:
    parts = [f"step {record['step']}", f"{record['tokens']:,} tokens", f"lr {record['learning_rate']:.3g}"]
    if record["train_loss"] is not None:
        parts.append(f"train loss ({record['train_loss_softmax']} softmax) {record['train_loss']:.3f}")
    for name in ("train", "dev"):
        if record[f"{name}_perplexity"] is not None:
            both, forward, backward = (
                record[f"{name}_{kind}perplexity"] for kind in ("", "forward_", "backward_")
            )
            parts.append(f"{name} ppl {both:.1f} (fwd {forward:.1f}, bwd {backward:.1f})")
    return " | ".join(parts)
