"""The progress bar's rate counts training steps only, not evaluations or checkpoints."""

import io
import math

import pytest
from tqdm import tqdm

from spacy_elmo.training import load_pretrain_config
from spacy_elmo.training.metrics import Counters, paused, progress_fields

from .conftest import TINY_CONFIG


def test_paused_time_stays_out_of_the_rate_and_elapsed_time() -> None:
    clock = [0.0]
    progress = tqdm(total=10, file=io.StringIO(), mininterval=0, miniters=1, smoothing=1.0)
    progress._time = lambda: clock[0]
    progress.start_t = progress.last_print_t = 0.0

    @paused(progress)
    def evaluate() -> None:
        clock[0] += 40.0

    for _ in range(3):  # a 1-second step, then a 40-second evaluation, three times
        clock[0] += 1.0
        progress.update(1)
        evaluate()
    clock[0] += 1.0
    progress.update(1)

    assert progress.format_dict["rate"] == pytest.approx(1.0)  # steps per second
    assert progress.format_dict["elapsed"] == pytest.approx(4.0)
    progress.close()


def test_a_line_written_during_a_pause_redraws_the_bar_without_the_paused_time() -> None:
    """The evaluation prints its line inside the pause: the bar drawn under it must not show an
    elapsed time that the next draw takes back."""
    clock, output = [0.0], io.StringIO()
    progress = tqdm(total=10, file=output, mininterval=0, miniters=1, ascii=True)
    progress._time = lambda: clock[0]
    progress.start_t = progress.last_print_t = 0.0
    clock[0] += 5.0
    progress.update(1)
    with paused(progress):
        clock[0] += 30.0
        progress.write("step 1, dev perplexity 100.0", file=output)
    assert "[00:35" not in output.getvalue()
    assert output.getvalue().rstrip().endswith("1/10 [00:05<00:45,  5.00s/it]")
    clock[0] += 5.0
    progress.update(1)
    assert progress.format_dict["elapsed"] == pytest.approx(10.0)
    progress.close()


def test_paused_runs_its_work_under_a_disabled_bar() -> None:
    """The bar is disabled on every distributed rank but the first, and the ranks still checkpoint."""
    progress = tqdm(total=10, disable=True)
    calls = []

    @paused(progress)
    def checkpoint() -> None:
        calls.append("saved")

    checkpoint()
    assert calls == ["saved"]


def test_progress_fields_name_the_time_cap_the_last_dev_perplexity_and_a_scheduled_rate() -> None:
    tiny = load_pretrain_config(TINY_CONFIG).training
    settings = tiny.model_copy(update=dict(max_minutes=60.0, max_steps=0))
    counters = Counters(elapsed_s=25 * 60.0, history=[{"dev_perplexity": 132.26}, {"dev_perplexity": None}])
    fields = progress_fields(5.0, sampled=True, tokens_per_s=2661.4, counters=counters, settings=settings)
    assert fields == {"tok/s": "2,661", "loss": "5.000", "dev_ppl": "132.3", "cap_left": "35min"}
    without_cap = progress_fields(
        5.0,
        sampled=False,
        tokens_per_s=1.0,
        counters=Counters(),
        settings=tiny.model_copy(update=dict(max_steps=0)),
    )
    assert without_cap == {"tok/s": "1", "loss": "5.000", "ppl": f"{math.exp(5.0):.1f}"}
    halfway = Counters(step=31)  # the latest step, 30 of the 60, took half the peak rate
    decaying = tiny.model_copy(update=dict(lr_schedule="linear", learning_rate=0.2))
    fields = progress_fields(5.0, sampled=True, tokens_per_s=1.0, counters=halfway, settings=decaying)
    assert fields["lr"] == "0.1"
