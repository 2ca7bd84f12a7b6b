"""Every precision plan runs: any mode for any product at any row count, measured or forced.

A plan gives each product a mode per row bucket (`ProductModes`), so one forward pass can run
the LSTM's input-to-gate product in bf16 and the recurrent product that adds to it in float32.
The tests here force such plans directly (not through timings), and through the measuring path
with timings that change from call to call.
"""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, auto_precision, products
from spacy_elmo.bilm import model as model_module
from spacy_elmo.bilm.auto_precision import Measurement, PrecisionPlan
from spacy_elmo.bilm.precision import Precision, ProductModes, ProductSite

from .test_fast_paths import every_weight_copied
from .test_precision import BOUNDS, deviation

MODES: tuple[Precision, ...] = ("fp32", "bf16", "int8")


def _words(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
        for _ in range(count)
    ]


BATCH = [words for words in (_words(length, length) for length in range(1, 21))]
"""20 sentences of 1 to 20 words, 210 tokens of about 200 word types: every product sees the
rows of its largest bucket (a batch's types and tokens, LSTM steps of up to 20 rows)."""
ONE_SENTENCE = [["Short", "one"]]
"""Word types the batch does not have (the token cache would skip the encoder): the smallest
bucket of every product (4 types, LSTM steps of one row)."""


def _plan(
    sites: dict[str, ProductSite], base: Precision, slot: tuple[str, int] | None, mode: Precision
) -> PrecisionPlan:
    """Every product at `base` at every row count it is timed at, but `mode` at `slot` (a product
    name and the index of one of its row counts)."""
    return PrecisionPlan(
        {
            name: tuple(
                (rows, mode if (name, index) == slot else base) for index, rows in enumerate(site.rows)
            )
            for name, site in sites.items()
        }
    )


def _plans(sites: dict[str, ProductSite]) -> Iterator[PrecisionPlan]:
    """Each mode for the whole model, and each mode at each (product, row bucket) with every other
    bucket of every product at each mode: every pair of modes meets at every product boundary."""
    for base in MODES:
        yield _plan(sites, base, None, base)
        for name, site in sites.items():
            for index in range(len(site.rows)):
                for mode in MODES:
                    if mode != base:
                        yield _plan(sites, base, (name, index), mode)


def _force(bilm: BiLM, plan: PrecisionPlan, monkeypatch: pytest.MonkeyPatch) -> None:
    """`set_precision("auto")` with `plan` as what the measurement chose."""
    monkeypatch.setattr(model_module, "measured_plan", lambda sites, **_: plan)
    bilm.set_precision("auto")
    assert bilm.precision_plan is plan


@pytest.mark.slow
def test_every_mode_at_every_product_and_row_bucket_runs(bilm, monkeypatch) -> None:
    """147 plans on the tiny biLM, each embedding a batch and a sentence. Only that they run and
    give finite layers of the right shapes is checked: how far each mode strays from float32 is
    `test_precision.py`'s (this biLM clips so hard that int8 in one product can move a layer by
    0.9 while int8 in all of them stays under 0.3)."""
    exact = bilm.embed_sentences(BATCH + ONE_SENTENCE)
    sites = bilm.product_sites()
    n_plans = 0
    for plan in _plans(sites):
        _force(bilm, plan, monkeypatch)
        got = bilm.embed_sentences(BATCH, batch_size=len(BATCH)) + bilm.embed_sentences(ONE_SENTENCE)
        assert [layers.shape for layers in got] == [layers.shape for layers in exact]
        assert all(np.isfinite(layers).all() for layers in got), plan.modes
        n_plans += 1
    n_slots = sum(len(site.rows) for site in sites.values())
    assert n_plans == len(MODES) * (1 + n_slots * (len(MODES) - 1))


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "packed"])
def test_gate_inputs_in_bf16_meet_a_float32_recurrent_product(bilm, cache_dir, monkeypatch, packed) -> None:
    """The crash of issue 62: "auto" measured the input-to-gate products fastest in bf16 and the
    recurrent products fastest in float32; the step added bf16 gate inputs to a float32 product.
    The batch's float32 steps take the plain product, or the packed weights where they are large."""
    if packed:
        if not torch.backends.mkldnn.is_available():
            pytest.skip("no oneDNN in this torch build: nothing is packed")
        every_weight_copied(monkeypatch)

    def timer(measurement: Measurement) -> float:
        kind = json.loads(measurement.product)["kind"]
        if measurement.mode == "fp32":
            return 1e-3
        return 0.5e-3 if (kind, measurement.mode) == ("stacked_linear", "bf16") else 1.5e-3

    monkeypatch.setattr(auto_precision, "perf_counter_timer", timer)
    exact = bilm.embed_sentences(BATCH)
    bilm.set_precision("auto")
    modes = bilm.precision_plan.modes
    assert {mode for _, mode in modes["lstm.layers.0.input"]} == {"bf16"}
    assert {mode for _, mode in modes["lstm.layers.0.recurrent"]} == {"fp32"}
    max_abs, _ = deviation(bilm.embed_sentences(BATCH), exact)
    assert max_abs < BOUNDS["bf16"][0]
    # highways, token projection, recurrent and projection weights: not the bf16 input products
    float32_weights = len(bilm.token_encoder.highways) + 1 + 2 * bilm.config.n_layers
    assert products.WEIGHT_COPIES.count("packed") == (float32_weights if packed else 0)


@pytest.mark.parametrize("seed", range(4))
def test_plans_measured_with_timings_that_flip_between_calls_run(bilm, cache_dir, monkeypatch, seed) -> None:
    """A reduced mode's calls take 0.4x or 2x float32's, drawn call by call: the plans mix modes
    across products and row counts at random, as a busy machine makes them."""
    rng = random.Random(seed)

    def timer(measurement: Measurement) -> float:
        return 1e-3 if measurement.mode == "fp32" else rng.choice((0.4e-3, 2e-3))

    monkeypatch.setattr(auto_precision, "perf_counter_timer", timer)
    exact = bilm.embed_sentences(BATCH + ONE_SENTENCE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bilm.set_precision("auto")
    got = bilm.embed_sentences(BATCH) + bilm.embed_sentences(ONE_SENTENCE)
    assert [layers.shape for layers in got] == [layers.shape for layers in exact]
    modes_seen: set[ProductModes] = set(bilm.precision_plan.modes.values())
    assert len(modes_seen) > 1  # the timings did flip: not one mode for everything
    assert all(np.isfinite(layers).all() for layers in got)


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path))
    return tmp_path / auto_precision.CACHE_FOLDER
