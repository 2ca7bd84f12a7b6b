"""The learning rate at each step: an optional linear warm-up, then constant, linear or cosine decay.

A pure function of the step, so a resumed run continues on the same curve with nothing extra in
its checkpoint (the optimizer's stored `lr` is overwritten before every step).
"""

from __future__ import annotations

import math

import torch

from .config import TrainingSettings


def learning_rate_at(step: int, settings: TrainingSettings) -> float:
    """The rate for the optimizer step taken after `step` completed steps (`step` counts from 0).

    Warm-up: `learning_rate * (step + 1) / warmup_steps` for the first `warmup_steps` steps. Then
    `constant` keeps `learning_rate`; `linear` and `cosine` go from `learning_rate` down to
    `final_learning_rate` over the steps from `warmup_steps` to the decay horizon (`decay_steps`,
    or `max_steps` when that is 0) and stay there after it.
    """
    peak, floor = settings.learning_rate, settings.final_learning_rate
    if step < settings.warmup_steps:
        return peak * (step + 1) / settings.warmup_steps
    if settings.lr_schedule == "constant":
        return peak
    horizon = settings.decay_horizon
    progress = min((step - settings.warmup_steps) / max(horizon - settings.warmup_steps, 1), 1.0)
    if settings.lr_schedule == "linear":
        return peak + (floor - peak) * progress
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def latest_learning_rate(steps_done: int, settings: TrainingSettings) -> float:
    """The rate of the last step taken (of the first, before any): what logs and the bar show."""
    return learning_rate_at(max(steps_done - 1, 0), settings)


def set_learning_rate(optimizer: torch.optim.Optimizer, rate: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = rate
