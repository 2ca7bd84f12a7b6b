"""Learning-rate schedules: values worked out by hand, config errors, and the rate a run uses."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from spacy_elmo.training import load_pretrain_config, pretrain
from spacy_elmo.training.config import TrainingSettings
from spacy_elmo.training.errors import TrainingConfigError
from spacy_elmo.training.schedule import learning_rate_at

from .conftest import TINY_CONFIG, read_metrics, tiny_overrides


def settings(**changes: object) -> TrainingSettings:
    base = load_pretrain_config(TINY_CONFIG).training
    return base.model_copy(update=changes)


def test_constant_rate_with_and_without_warm_up():
    assert [learning_rate_at(step, settings(learning_rate=0.5)) for step in (0, 7, 10_000)] == [0.5] * 3
    warm = settings(learning_rate=0.4, warmup_steps=4)
    assert [learning_rate_at(step, warm) for step in range(6)] == pytest.approx(
        [0.1, 0.2, 0.3, 0.4, 0.4, 0.4]
    )


def test_linear_decay_from_the_peak_to_the_floor_over_the_steps_after_warm_up():
    # warm-up steps 0-1; decay over steps 2..12 (10 steps): 1.0 at 2, 0.55 at 7, 0.1 at 12 and after
    linear = settings(
        learning_rate=1.0, lr_schedule="linear", warmup_steps=2, decay_steps=12, final_learning_rate=0.1
    )
    assert [learning_rate_at(step, linear) for step in (0, 1, 2, 7, 12, 50)] == pytest.approx(
        [0.5, 1.0, 1.0, 0.55, 0.1, 0.1]
    )


def test_cosine_decay_ends_at_max_steps_when_decay_steps_is_unset():
    cosine = settings(learning_rate=2.0, lr_schedule="cosine", max_steps=8, decay_steps=0)
    expected = [2.0 * 0.5 * (1 + math.cos(math.pi * step / 8)) for step in (0, 2, 4, 8)]
    assert expected == pytest.approx([2.0, 1.0 + 2**-0.5, 1.0, 0.0])
    assert [learning_rate_at(step, cosine) for step in (0, 2, 4, 8, 9)] == pytest.approx([*expected, 0.0])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"training.lr_schedule": "cosine", "training.max_steps": 0, "training.max_minutes": 30},
            r"lr_schedule = 'cosine' decays over steps, but neither decay_steps nor max_steps is set",
        ),
        (
            {"training.lr_schedule": "linear", "training.warmup_steps": 100},
            r"the decay ends at step 60, not after the 100 warm-up steps",
        ),
        ({"training.final_learning_rate": 0.5}, r"final_learning_rate 0.5 is above learning_rate 0.2"),
        ({"training.lr_schedule": "step"}, r"lr_schedule is 'step'; use one of constant, linear, cosine"),
    ],
)
def test_schedule_mistakes_are_named(overrides, message):
    with pytest.raises(TrainingConfigError, match=message):
        load_pretrain_config(TINY_CONFIG, overrides)


def test_a_run_takes_its_steps_at_the_scheduled_rates(tiny_corpus, tmp_path: Path):
    """A schedule that reaches 0 after one step leaves the weights of step 1 unchanged to step 6."""

    def weights(max_steps: int, **training: object) -> dict[str, torch.Tensor]:
        output_dir = tmp_path / f"{max_steps}-{len(training)}"
        overrides = tiny_overrides(tiny_corpus, max_steps=max_steps, eval_every=3, **training)
        pretrain(load_pretrain_config(TINY_CONFIG, overrides), output_dir)
        return load_file(str(output_dir / "model.safetensors"))

    one_step = weights(1)
    to_zero = dict(lr_schedule="linear", decay_steps=1, final_learning_rate=0.0)
    after_decay, constant = weights(6, **to_zero), weights(6)
    for name in one_step:
        torch.testing.assert_close(after_decay[name], one_step[name], rtol=0, atol=0, msg=name)
    assert any(not torch.equal(constant[name], one_step[name]) for name in one_step)
    rates = [record["learning_rate"] for record in read_metrics(tmp_path / "6-3")]
    assert rates == [0.2, 0.0, 0.0]  # steps 0 (the first step's rate), 3, 6


def test_a_resumed_run_continues_on_the_same_decaying_curve(tiny_corpus, tmp_path: Path):
    """Stopped half way down a cosine and resumed, a run ends where an unbroken one does."""
    schedule = dict(lr_schedule="cosine", warmup_steps=2, decay_steps=12, eval_every=3, checkpoint_every=3)

    def run(output_dir: Path, max_steps: int, resume: bool = False) -> None:
        overrides = tiny_overrides(tiny_corpus, max_steps=max_steps, **schedule)
        pretrain(load_pretrain_config(TINY_CONFIG, overrides), output_dir, resume=resume)

    run(tmp_path / "unbroken", 12)
    run(tmp_path / "resumed", 6)
    run(tmp_path / "resumed", 12, resume=True)
    unbroken, resumed = (
        load_file(str(tmp_path / name / "model.safetensors")) for name in ("unbroken", "resumed")
    )
    for name in unbroken:
        torch.testing.assert_close(resumed[name], unbroken[name], rtol=1e-6, atol=1e-7, msg=name)
    rates = [
        [record["learning_rate"] for record in read_metrics(tmp_path / name)]
        for name in ("unbroken", "resumed")
    ]
    assert rates[0] == rates[1] and rates[0][-1] < rates[0][2] < rates[0][1]
