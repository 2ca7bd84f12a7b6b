"""precision = "auto": chosen by timing each product on this machine, cached, never slower."""

from __future__ import annotations

import json
import logging
import multiprocessing
import warnings

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, auto_precision, torch_probes
from spacy_elmo.bilm.auto_precision import (
    Measurement,
    ProductTimings,
    measured_plan,
    read_cached,
    write_cached,
)

from .test_model import SENTENCES
from .test_precision import BOUNDS, deviation

FAKE_SECONDS = {
    # product kind -> mode -> milliseconds per call; float32 takes 1 ms everywhere
    "stacked_accumulate": {"bf16": 2.0, "int8": 0.5},  # the recurrent products: int8 wins
    "stacked_linear": {"bf16": 0.4, "int8": 0.6},  # the LSTM input products: bf16 wins
    "linear": {"bf16": 0.95, "int8": 0.95},  # highway, projection: faster, but within the noise
    "stacked_matmul": {"bf16": 3.5, "int8": "fast with one row only"},  # never slower anywhere
    "matmul": {"bf16": 0.5},  # the char convolutions (no int8 mode): bf16 wins
}
WANT = {  # product kind -> its mode at each row count timed, fewest rows first
    "stacked_accumulate": ["int8"],
    "stacked_linear": ["bf16"],
    "linear": ["fp32"],
    "stacked_matmul": ["int8", "fp32"],  # int8 with one row, fp32 with 64: never slower
    "matmul": ["bf16"],
}


def fake_timer(calls: list[Measurement]):
    """Milliseconds from `FAKE_SECONDS` by the product's kind, mode and rows; runs nothing."""

    def timer(measurement: Measurement) -> float:
        calls.append(measurement)
        if measurement.mode == "fp32":
            return 1e-3
        seconds = FAKE_SECONDS[json.loads(measurement.product)["kind"]][measurement.mode]
        if isinstance(seconds, str):
            return (0.5 if measurement.rows == 1 else 1.2) * 1e-3
        return seconds * 1e-3

    return timer


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path))
    return tmp_path / auto_precision.CACHE_FOLDER


@pytest.mark.parametrize("flags_say_bf16_is_native", [True, False])
def test_auto_follows_the_measurement_not_the_flags(
    bilm, cache_dir, monkeypatch, flags_say_bf16_is_native
) -> None:
    monkeypatch.setattr(torch_probes, "native_bf16_cpu", lambda: flags_say_bf16_is_native)
    calls: list[Measurement] = []
    monkeypatch.setattr(auto_precision, "perf_counter_timer", fake_timer(calls))
    bilm.set_precision("auto")
    sites = bilm.product_sites()
    assert bilm.precision == "auto" and calls
    modes = bilm.precision_plan.modes
    assert {name: [mode for _, mode in modes[name]] for name in sites} == {
        name: WANT[site.kind] for name, site in sites.items()
    }
    assert modes["lstm.layers.0.projection"] == ((1, "int8"), (64, "fp32"))
    # the modules run what the plan says: a ReducedProduct in the chosen mode, none for fp32
    recurrent, highway = bilm.lstm.layers[0].reduced["recurrent"], bilm.token_encoder.highways[0]
    assert recurrent.for_rows(1) is recurrent.for_rows(64) is recurrent and recurrent.precision == "int8"
    assert "linear" not in highway.reduced
    # the projection: int8 for inputs of fewer than 8 rows (the geometric mean of 1 and 64)
    projection = bilm.lstm.layers[1].reduced["projection"]
    assert projection.for_rows(1).precision == projection.for_rows(7).precision == "int8"
    assert projection.for_rows(8) is None and projection.for_rows(64) is None
    timings = bilm.precision_plan.timings["lstm.layers.0.projection"]
    assert timings.best["int8"] == pytest.approx({1: 0.5e-3, 64: 1.2e-3})
    assert "bf16" not in timings.best  # hopeless at the warm-up (3.5x float32): not timed further
    # the layers of the LSTM stack share their shapes: each distinct product is timed once
    assert len({call.product for call in calls}) < len(sites)
    with torch.no_grad():
        assert len(bilm.embed_sentences(SENTENCES)) == len(SENTENCES)


def test_a_slow_first_float32_call_does_not_keep_a_hopeless_mode(bilm) -> None:
    """float32's first call at a row count may pack the weight (7x its later calls once): it is
    not float32's warm-up, or a mode 2.5x slower than float32 would look faster and be timed on."""
    first_calls: set[tuple[str, int]] = set()

    def timer(measurement: Measurement) -> float:
        if measurement.mode != "fp32":
            return 2.5e-3
        first = (measurement.product, measurement.rows) not in first_calls
        first_calls.add((measurement.product, measurement.rows))
        return 10e-3 if first else 1e-3

    plan = measured_plan(bilm.product_sites(), cache_dir=None, timer=timer)
    assert plan.timings and all(set(timings.best) == {"fp32"} for timings in plan.timings.values())


def test_one_slow_call_does_not_drop_a_faster_mode(bilm) -> None:
    """A busy spell that hits int8's warm-up alone (5x float32) must not hide that int8 takes
    half float32's time on every later call."""
    seen: set[tuple[str, int]] = set()

    def timer(measurement: Measurement) -> float:
        if measurement.mode == "fp32":
            return 1e-3
        first = (measurement.product, measurement.rows, measurement.mode) not in seen
        seen.add((measurement.product, measurement.rows, measurement.mode))
        return 5e-3 if first else 0.5e-3

    plan = measured_plan(bilm.product_sites(), cache_dir=None, timer=timer)
    assert plan.modes["lstm.layers.0.recurrent"][0][1] in ("bf16", "int8")
    assert all(mode != "fp32" for modes in plan.modes.values() for _, mode in modes)


def test_timings_from_a_busy_machine_serve_this_process_but_are_not_cached(bilm, cache_dir, caplog) -> None:
    """float32's calls varying 3x mean the machine was busy: a plan measured then must not stick
    in the cache for every later process."""
    float32_calls = iter(range(10**6))

    def timer(measurement: Measurement) -> float:
        if measurement.mode == "fp32":
            return (3e-3, 1e-3)[next(float32_calls) % 2]
        return 0.5e-3

    with caplog.at_level(logging.INFO, logger="spacy_elmo.bilm.auto_precision"):
        plan = measured_plan(bilm.product_sites(), cache_dir=cache_dir, timer=timer)
    assert plan.timings and plan.reduces()
    assert not cache_dir.exists() or not list(cache_dir.glob("*.json"))
    assert "busy" in caplog.text and "times it again" in caplog.text


def test_jitter_of_microsecond_calls_does_not_stop_caching(bilm, cache_dir) -> None:
    """Calls of 10 to 30 us vary that much on an idle machine (the clock, the caches): their
    timings are cached all the same."""
    float32_calls = iter(range(10**6))

    def timer(measurement: Measurement) -> float:
        if measurement.mode == "fp32":
            return (30e-6, 10e-6)[next(float32_calls) % 2]
        return 5e-6

    plan = measured_plan(bilm.product_sites(), cache_dir=cache_dir, timer=timer)
    assert len(list(cache_dir.glob("*.json"))) == len(
        {auto_precision.product_key(site) for site in bilm.product_sites().values()}
    )
    assert plan.reduces()


def test_the_largest_products_are_timed_first_step_products_before_equal_ones(bilm) -> None:
    calls: list[Measurement] = []
    sites = bilm.product_sites()
    measured_plan(sites, cache_dir=None, timer=fake_timer(calls), budget_seconds=1e-9)
    first = next(site for site in sites.values() if auto_precision.product_key(site) == calls[0].product)
    largest = max(site.parameters[0].numel() for site in sites.values())
    assert first.parameters[0].numel() == largest
    assert min(first.rows) == min(
        min(site.rows) for site in sites.values() if site.parameters[0].numel() == largest
    )
    assert {call.product for call in calls} == {calls[0].product}  # the budget ran out after it


def test_the_plan_is_cached_and_the_next_process_reuses_it(bilm, cache_dir, monkeypatch) -> None:
    calls: list[Measurement] = []
    monkeypatch.setattr(auto_precision, "perf_counter_timer", fake_timer(calls))
    first = bilm.set_precision("auto").precision_plan
    n_products = len({call.product for call in calls})
    assert len(list(cache_dir.glob("*.json"))) == n_products
    calls.clear()
    again = BiLM(bilm.config)
    again.load_state_dict(bilm.state_dict())
    assert again.set_precision("auto").precision_plan == first and not calls  # read, not timed
    record = json.loads(next(cache_dir.glob("*.json")).read_text())
    key = json.loads(record["key"])
    assert key["torch"] == torch.__version__ and key["cpu"] == torch_probes.cpu_identity()
    assert all(mode in ("fp32", "bf16", "int8") for _, mode in record["chosen"])
    assert key["threads"] == torch.get_num_threads()
    threads = torch.get_num_threads()
    try:  # another thread count is another machine, as far as speed goes
        torch.set_num_threads(threads + 1)
        again.set_precision("auto")
    finally:
        torch.set_num_threads(threads)
    assert len({call.product for call in calls}) == n_products


def test_an_unreadable_cache_file_is_timed_again_and_replaced(bilm, cache_dir, monkeypatch) -> None:
    calls: list[Measurement] = []
    monkeypatch.setattr(auto_precision, "perf_counter_timer", fake_timer(calls))
    plan = bilm.set_precision("auto").precision_plan
    damaged = sorted(cache_dir.glob("*.json"))[0]
    damaged.write_text('{"version": 1, "key": "cut off')
    calls.clear()
    assert bilm.set_precision("auto").precision_plan == plan
    assert len({call.product for call in calls}) == 1
    assert json.loads(damaged.read_text())["version"] == auto_precision.CACHE_VERSION


def test_when_the_budget_runs_out_the_rest_stays_fp32_and_uncached(bilm, cache_dir, monkeypatch) -> None:
    sites = bilm.product_sites()
    plan = measured_plan(sites, cache_dir=cache_dir, timer=fake_timer([]), budget_seconds=0.06)
    timed = set(plan.timings)
    assert timed and len(timed) < len(plan.modes)
    assert all(plan.modes[name] == ((1, "fp32"),) for name in plan.modes if name not in timed)
    timed_keys = {auto_precision.product_key(site) for name, site in sites.items() if name in timed}
    assert {read_cached(cache_dir, key) is not None for key in timed_keys} == {True}
    assert len(list(cache_dir.glob("*.json"))) == len(timed_keys)
    untimed_line = next(line for line in plan.lines() if line.split()[0] not in timed)
    assert untimed_line.split()[1] == "fp32" and "not timed yet" in untimed_line


def _write_many(cache_dir, key: str, seed: int) -> None:
    for step in range(40):
        value = float(seed * 1000 + step)
        write_cached(cache_dir, key, ProductTimings({"fp32": {1: value}}, {"fp32": {1: 1.0}}))


def test_processes_writing_one_cache_entry_at_once_leave_a_whole_file(tmp_path) -> None:
    key = json.dumps({"kind": "test"})
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_many, args=(tmp_path, key, seed)) for seed in range(4)]
    for writer in writers:
        writer.start()
    reads = 0
    while any(writer.is_alive() for writer in writers):
        if auto_precision.cache_file(tmp_path, key).exists():
            assert read_cached(tmp_path, key) is not None  # never a torn or empty file
            reads += 1
    for writer in writers:
        writer.join(timeout=60)
        assert writer.exitcode == 0
    assert reads > 0  # the check above ran while writers were replacing the file
    final = read_cached(tmp_path, key)
    assert final is not None and final.best["fp32"][1] % 1000 == 39
    assert not list(tmp_path.glob(".*.tmp"))


def test_auto_with_the_real_clock_stays_within_the_reduced_bounds(bilm, cache_dir, monkeypatch) -> None:
    monkeypatch.setattr(auto_precision, "BUDGET_SECONDS", 1.0)
    exact = bilm.embed_sentences(SENTENCES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no bf16-is-emulated warning: auto never asks for a slow mode
        bilm.set_precision("auto")
    plan = bilm.precision_plan
    assert set(plan.modes) == set(bilm.product_sites()) and plan.timings  # a busy machine may time fewer
    for name, modes in plan.modes.items():
        timings = plan.timings.get(name)
        if timings is None:
            assert modes == ((1, "fp32"),)
            continue
        assert modes == timings.modes_by_rows()
        for n_rows, mode in modes:  # a reduced mode only where it beat float32 by the margin
            assert mode == "fp32" or (
                timings.best[mode][n_rows] * auto_precision.MIN_GAIN <= timings.best["fp32"][n_rows]
            )
    max_abs, min_cosine = deviation(bilm.embed_sentences(SENTENCES), exact)
    assert max_abs < BOUNDS["int8"][0] and min_cosine > BOUNDS["int8"][1]
    assert any(line.startswith("lstm.layers.0.recurrent") for line in plan.lines())
    np.testing.assert_array_equal(bilm.set_precision("fp32").embed_sentences(SENTENCES)[0], exact[0])
