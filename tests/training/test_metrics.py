"""The progress bar's rate counts training steps only, not evaluations or checkpoints."""

import io

import pytest
from tqdm import tqdm

from spacy_elmo.training.metrics import paused


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


def test_paused_runs_its_work_under_a_disabled_bar() -> None:
    """The bar is disabled on every distributed rank but the first, and the ranks still checkpoint."""
    progress = tqdm(total=10, disable=True)
    calls = []

    @paused(progress)
    def checkpoint() -> None:
        calls.append("saved")

    checkpoint()
    assert calls == ["saved"]
