"""The progress bar shows the run's own timing of its training steps, not tqdm's clock."""

import math
import re

import pytest

from spacy_elmo.training import load_pretrain_config, pretrain
from spacy_elmo.training.metrics import Counters, progress_bar, progress_fields

from .conftest import TINY_CONFIG, read_metrics, tiny_overrides


def test_the_bar_shows_our_training_time_fields_and_nothing_of_tqdms_clock(capsys) -> None:
    """tqdm's own rate and time left would count a 40-second evaluation as one slow step: the bar
    shows only the steps and the fields the run sets, which time training steps alone."""
    progress = progress_bar(60, 10, disable=False, interactive=True)
    tiny = load_pretrain_config(TINY_CONFIG).training.model_copy(update=dict(max_steps=60))
    counters = Counters(step=30, elapsed_s=95.0)
    fields = progress_fields(5.0, True, 1234.0, seconds_per_step=2.5, counters=counters, settings=tiny)
    progress.update(20)
    progress.set_postfix(fields, refresh=True)
    line = capsys.readouterr().err.rsplit("\r", 1)[-1]
    assert "30/60 steps, time=01:35, left=01:15, tok/s=1,234, loss=5.000" in line
    assert "it/s" not in line and "s/it" not in line and "<" not in line
    progress.close()
    unbounded = progress_bar(None, 0, disable=False, interactive=False)
    unbounded.set_postfix({"time": "00:01"}, refresh=True)
    assert capsys.readouterr().err.rsplit("\r", 1)[-1].startswith("0 steps, time=00:01")
    unbounded.close()


def test_progress_fields_name_the_time_cap_the_last_dev_perplexity_and_a_scheduled_rate() -> None:
    tiny = load_pretrain_config(TINY_CONFIG).training
    settings = tiny.model_copy(update=dict(max_minutes=60.0, max_steps=0))
    counters = Counters(elapsed_s=25 * 60.0, history=[{"dev_perplexity": 132.26}, {"dev_perplexity": None}])
    fields = progress_fields(5.0, True, 2661.4, seconds_per_step=1.0, counters=counters, settings=settings)
    assert fields == {
        "time": "25:00",
        "tok/s": "2,661",
        "loss": "5.000",
        "dev_ppl": "132.3",
        "cap_left": "35min",
    }
    without_cap = progress_fields(
        5.0,
        sampled=False,
        tokens_per_s=1.0,
        seconds_per_step=1.0,
        counters=Counters(),
        settings=tiny.model_copy(update=dict(max_steps=0)),
    )
    assert without_cap == {"time": "00:00", "tok/s": "1", "loss": "5.000", "ppl": f"{math.exp(5.0):.1f}"}
    halfway = Counters(step=31)  # the latest step, 30 of the 60, took half the peak rate
    decaying = tiny.model_copy(update=dict(lr_schedule="linear", learning_rate=0.2))
    fields = progress_fields(5.0, True, 1.0, seconds_per_step=1.0, counters=halfway, settings=decaying)
    assert fields["lr"] == "0.1"


@pytest.mark.parametrize("eval_every", [10, 0])
def test_the_bars_last_line_shows_the_last_dev_perplexity_once(
    tiny_corpus, tmp_path, capsys, eval_every: int
) -> None:
    """The run ends on an evaluation at step 20 (in the loop, or in `finish`); the bar's last line
    must carry its perplexity, and a log file must hold that line once."""
    overrides = tiny_overrides(tiny_corpus, max_steps=20, eval_every=eval_every, log_every=5)
    pretrain(load_pretrain_config(TINY_CONFIG, overrides), tmp_path)
    final = read_metrics(tmp_path)[-1]
    assert final["step"] == 20
    last_lines = [line for line in re.split(r"[\r\n]", capsys.readouterr().err) if "20/20 steps" in line]
    assert len(last_lines) == 1, last_lines
    assert re.search(rf"dev_ppl={final['dev_perplexity']:.1f}(,|$)", last_lines[0]), last_lines[0]
