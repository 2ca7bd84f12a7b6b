"""The metrics log of a pretraining run: one JSON record per evaluation, and the progress bar's fields."""

from __future__ import annotations

import json
import math
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


def progress_bar(total_steps: int | None, initial_step: int, disable: bool, interactive: bool) -> tqdm:
    """The pretraining bar: steps done and the fields `progress_fields` sets, nothing of tqdm's clock.

    tqdm's own rate and time left count every second since the bar started, so a 40-second
    evaluation would read as one very slow step; our fields time training steps only. The bar is
    drawn every second on a terminal and every minute into a log file.
    """
    with_total = "{l_bar}{bar}| {n_fmt}/{total_fmt} steps{postfix}"
    return tqdm(
        total=total_steps,
        initial=initial_step,
        disable=disable,
        mininterval=1.0 if interactive else 60.0,
        dynamic_ncols=True,
        bar_format=with_total if total_steps else "{n_fmt} steps{postfix}",
    )


def progress_fields(
    loss: float,
    sampled: bool,
    tokens_per_s: float,
    seconds_per_step: float,
    counters: Counters,
    settings: TrainingSettings,
) -> dict[str, str]:
    """The bar's fields: the run's time so far (resumed parts included), the time left until
    `max_steps` at the training steps' own pace (evaluations not counted), tokens/s, loss,
    perplexity (training with a full softmax, else the last dev one), the learning rate when a
    schedule moves it, and the minutes left under `max_minutes` (`cap_left`)."""
    fields = {"time": tqdm.format_interval(counters.elapsed_s)}
    if settings.max_steps:
        fields["left"] = tqdm.format_interval(max(settings.max_steps - counters.step, 0) * seconds_per_step)
    fields.update({"tok/s": f"{tokens_per_s:,.0f}", "loss": f"{loss:.3f}"})
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
