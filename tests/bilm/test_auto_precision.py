"""precision = "auto": chosen by timing each product on this machine, cached, never slower."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from filelock import FileLock

from spacy_elmo.bilm import BiLM, auto_precision, torch_probes
from spacy_elmo.bilm.auto_precision import (
    Measurement,
    ProductTimings,
    measured_plan,
    read_cached,
    write_cached,
)

from ..conftest import REPO_ROOT
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


def test_timings_from_a_busy_machine_choose_fp32_and_are_not_cached(bilm, cache_dir, caplog) -> None:
    """float32's calls varying 3x mean the machine was busy: a plan measured then must not stick
    in the cache for every later process, nor differ from the plan of processes started at the
    same moment (which find nothing cached: float32)."""
    float32_calls = iter(range(10**6))

    def timer(measurement: Measurement) -> float:
        if measurement.mode == "fp32":
            return (3e-3, 1e-3)[next(float32_calls) % 2]
        return 0.5e-3

    with caplog.at_level(logging.INFO, logger="spacy_elmo.bilm.auto_precision"):
        plan = measured_plan(bilm.product_sites(), cache_dir=cache_dir, timer=timer)
    assert plan.timings and not plan.reduces()
    assert all("too noisy to choose" in line for line in plan.lines())
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


def test_a_cache_that_cannot_be_runs_auto_without_one_and_says_so(
    bilm, tmp_path, monkeypatch, caplog
) -> None:
    """`SPACY_ELMO_CACHE` names a file: "auto" still chooses its plan, timing every product (as
    with a read-only cache), warns with the cache error's words, and writes nothing."""
    calls: list[Measurement] = []
    monkeypatch.setattr(auto_precision, "perf_counter_timer", fake_timer(calls))
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache should be", encoding="utf8")
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(not_a_folder))
    with caplog.at_level(logging.WARNING, logger=auto_precision.__name__):
        plan = bilm.set_precision("auto").precision_plan
    assert plan.reduces() and calls
    assert "keeping nothing" in caplog.text and "is a file, not a directory" in caplog.text
    assert not_a_folder.read_text(encoding="utf8") == "a file where the cache should be"


@pytest.mark.parametrize("failing,method", [("int8", "prepare"), ("bf16", "native")])
def test_a_reduced_mode_that_fails_here_is_left_out_and_auto_goes_on(
    bilm, cache_dir, monkeypatch, caplog, failing, method
) -> None:
    """torch raises when one mode's copies are made (int8) or at its every call (bf16), as where
    a kernel is missing: "auto" warns, leaves that mode out, chooses among the others as the
    timings say, and its plan runs."""
    from spacy_elmo.bilm.precision import ReducedProduct

    original = getattr(ReducedProduct, method)

    def failing_method(self, *args: Any, **kwargs: Any) -> Any:
        if self.precision == failing:
            raise RuntimeError(f"no {failing} kernel for this product here")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ReducedProduct, method, failing_method)
    fake = fake_timer([])
    monkeypatch.setattr(
        auto_precision, "perf_counter_timer", lambda measurement: (measurement.call(), fake(measurement))[1]
    )
    exact = bilm.embed_sentences(SENTENCES)
    with caplog.at_level(logging.WARNING, logger=auto_precision.__name__):
        plan = bilm.set_precision("auto").precision_plan
    modes = {mode for product_modes in plan.modes.values() for _, mode in product_modes}
    assert failing not in modes and modes - {"fp32"}  # the other reduced mode still won somewhere
    assert f"in {failing} fails on this machine (no {failing} kernel for this product here)" in caplog.text
    max_abs, min_cosine = deviation(bilm.embed_sentences(SENTENCES), exact)
    assert max_abs < BOUNDS["int8"][0] and min_cosine > BOUNDS["int8"][1]


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


class FakeClock:
    """Stands in for the `time` module of `auto_precision`: it moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_the_default_timer_returns_the_seconds_the_call_took(monkeypatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(auto_precision, "time", clock)
    measurement = Measurement("product", "fp32", 1, lambda: clock.advance(0.25))
    assert auto_precision.perf_counter_timer(measurement) == 0.25
    assert clock.now == 1000.25  # the call ran once, inside the timing


def test_each_row_count_runs_the_reduced_mode_that_beat_float32_at_best_and_typically() -> None:
    """Hand-worked with MIN_GAIN 1.1: a mode wins at a row count when its best time and its median
    time relative to float32's are both at most 1 / 1.1 = 0.909 of float32's; of two winners the
    one with the smaller relative time runs; equal neighbouring row counts are merged."""
    fp32 = {rows: 1.0 for rows in (1, 2, 8, 64)}
    timings = ProductTimings(
        best={
            "fp32": fp32,
            "bf16": {1: 0.5, 2: 0.5, 8: 0.5, 64: 0.95},
            "int8": {1: 0.4, 2: 0.4, 8: 0.95, 64: 0.6},
        },
        relative={
            "fp32": fp32,
            "bf16": {1: 0.6, 2: 0.6, 8: 0.6, 64: 0.6},
            "int8": {1: 0.5, 2: 0.5, 8: 0.5, 64: 0.95},
        },
    )
    # 1 and 2: both win, int8 relatively faster; 8: int8 only typically faster (best 0.95);
    # 64: bf16 only typically faster, int8 only at best
    assert timings.modes_by_rows() == ((1, "int8"), (8, "bf16"), (64, "fp32"))
    timings.fp32_spread = auto_precision.NOISY * 1.01  # a busy machine: nothing chosen
    assert timings.modes_by_rows() == ((1, "fp32"),)


def test_a_measured_plan_runs_its_reduced_modes_within_the_bounds(bilm, cache_dir, monkeypatch) -> None:
    """The plan auto chose is what runs: the layers move from the exact ones, within the bounds of
    the reduced modes, and fp32 brings the exact layers back (to float32 rounding)."""
    monkeypatch.setattr(auto_precision, "perf_counter_timer", fake_timer([]))
    exact = bilm.embed_sentences(SENTENCES)
    with warnings.catch_warnings():
        # no bf16-is-emulated or no-int8-kernels warning: auto never asks for a slow mode
        warnings.filterwarnings("error", message="This .* has no (bfloat16|int8)")
        plan = bilm.set_precision("auto").precision_plan
    assert [mode for _, mode in plan.modes["lstm.layers.0.input"]] == ["bf16"]  # as FAKE_SECONDS say
    max_abs, min_cosine = deviation(bilm.embed_sentences(SENTENCES), exact)
    assert 0 < max_abs < BOUNDS["int8"][0] and min_cosine > BOUNDS["int8"][1]
    for want, got in zip(exact, bilm.set_precision("fp32").embed_sentences(SENTENCES)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)  # packed or not: float32 rounding


AUTO_WORKER = """
import json, os, pathlib, sys, time
from spacy_elmo.bilm import BiLM, auto_precision
from tests.bilm.test_auto_precision import fake_timer

model_dir, run_dir, index = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
bilm = BiLM.from_allennlp(model_dir / "options.json", model_dir / "weights.hdf5")
fake, calls = fake_timer([]), []


def timer(measurement):
    start = time.monotonic()
    measurement.call()
    time.sleep(0.001)  # long enough for another process timing at the same moment to show
    calls.append((measurement.product, start, time.monotonic()))
    return fake(measurement) * 1e-3  # the same ratios, so small that the budget never runs out


auto_precision.perf_counter_timer = timer
auto_precision.MAX_ROUNDS = auto_precision.MIN_ROUNDS  # fewer calls; the plan is the same
(run_dir / f"ready{index}").touch()
while not (run_dir / "go").exists():
    time.sleep(0.01)
bilm.set_precision("auto")
bilm.embed_sentences([["every", "plan", "runs"], ["and", "this", "one", "too"]])
plan = {name: [list(step) for step in modes] for name, modes in bilm.precision_plan.modes.items()}
(run_dir / f"result{index}.json").write_text(json.dumps({"plan": plan, "calls": calls}))
"""


@pytest.mark.slow
def test_processes_starting_auto_at_once_time_one_at_a_time_and_share_one_plan(
    random_elmo_files, cache_dir, tmp_path
) -> None:
    """4 fresh processes on an empty cache, beside a process that keeps a core busy: each product
    is timed by one of them, never while another process times, and all 4 end with its plan."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for path, name in zip(random_elmo_files, ("options.json", "weights.hdf5")):
        (model_dir / name).write_bytes(path.read_bytes())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    environment = {**os.environ, "SPACY_ELMO_CACHE": str(cache_dir.parent), "PYTHONPATH": str(REPO_ROOT)}
    load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", AUTO_WORKER, str(model_dir), str(run_dir), str(index)],
            cwd=REPO_ROOT,
            env=environment,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(4)
    ]
    try:
        deadline = time.monotonic() + 120
        while len(list(run_dir.glob("ready*"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        (run_dir / "go").touch()
        for worker in workers:
            _, errors = worker.communicate(timeout=300)
            assert worker.returncode == 0, errors
    finally:
        load.kill()
        for worker in workers:
            worker.kill()
    results = [json.loads((run_dir / f"result{index}.json").read_text()) for index in range(4)]
    assert all(result["plan"] == results[0]["plan"] for result in results)
    assert any(mode != "fp32" for modes in results[0]["plan"].values() for _, mode in modes)
    timers_by_product: dict[str, set[int]] = {}
    for index, result in enumerate(results):
        for product, *_ in result["calls"]:
            timers_by_product.setdefault(product, set()).add(index)
    assert timers_by_product and all(len(timers) == 1 for timers in timers_by_product.values())
    # no two processes timed at the same moment: no call of one starts before another's ends
    calls = sorted(
        (start, end, index) for index, result in enumerate(results) for _, start, end in result["calls"]
    )
    overlapping = [(a, b) for a, b in zip(calls, calls[1:]) if b[0] < a[1] and a[2] != b[2]]
    assert not overlapping, overlapping[:3]
    assert len(list(cache_dir.glob("*.json"))) == len(timers_by_product)


def test_threads_setting_auto_on_one_model_at_once_share_one_plan(bilm, cache_dir, monkeypatch) -> None:
    """8 threads call `set_precision("auto")` on one model at once, then embed: one of them times
    each product (the others wait on its lock), all see the same plan and the same vectors."""
    calls: list[Measurement] = []
    monkeypatch.setattr(auto_precision, "perf_counter_timer", fake_timer(calls))
    ready = threading.Barrier(8)
    plans: list[dict] = []
    outputs: list[list[np.ndarray]] = []
    errors: list[BaseException] = []

    def set_auto_and_embed() -> None:
        try:
            ready.wait(timeout=60)
            plans.append(bilm.set_precision("auto").precision_plan.modes)
            ready.wait(timeout=60)  # every thread's set_precision is done: one plan runs
            outputs.append(bilm.embed_sentences(SENTENCES))
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=set_auto_and_embed) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and len(plans) == len(outputs) == 8
    assert all(plan == plans[0] for plan in plans)
    want = bilm.embed_sentences(SENTENCES)
    for got in outputs:
        for got_layers, want_layers in zip(got, want):
            np.testing.assert_array_equal(got_layers, want_layers)
    single = len([call for call in calls if call.mode == "fp32"])
    calls.clear()
    measured_plan(bilm.product_sites(), cache_dir=None, timer=fake_timer(calls))
    assert single == len([call for call in calls if call.mode == "fp32"])  # timed once, not 8 times


LOCK_HOLDER = """
import pathlib, sys, time
from filelock import FileLock

run_dir = pathlib.Path(sys.argv[1])
locks = [FileLock(path) for path in sys.argv[2:]]
for lock in locks:
    lock.acquire()
(run_dir / "held").touch()
while not (run_dir / "release").exists():
    time.sleep(0.01)
for lock in locks:
    lock.release()
"""


def test_a_process_that_waited_for_a_lock_times_nothing_and_runs_the_rest_in_fp32(
    bilm, cache_dir, monkeypatch, tmp_path
) -> None:
    """Another process holds every product's lock and caches the timings of one product only (its
    budget ran out, or the rest were too noisy): the waiting process reads that one, times none,
    and runs the others in fp32, as the other process does. The locks are released once the
    waiting side has found one held (no sleep that a slow machine could outlast)."""
    sites = bilm.product_sites()
    keys = {name: auto_precision.product_key(site) for name, site in sites.items()}
    recurrent = keys["lstm.layers.0.recurrent"]
    theirs = measured_plan(sites, cache_dir=None, timer=fake_timer([]))
    cache_dir.mkdir(parents=True)
    lock_files = [str(auto_precision.lock_file(cache_dir, key)) for key in set(keys.values())]
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(tmp_path), *lock_files])
    blocked = threading.Event()

    class ReportingLock(FileLock):
        """Tells the test when `measured_plan` found a lock held and starts to wait for it."""

        def acquire(self, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            if timeout:
                blocked.set()
            return super().acquire(timeout, *args, **kwargs)

    monkeypatch.setattr(auto_precision, "FileLock", ReportingLock)
    calls: list[Measurement] = []
    plans: list[auto_precision.PrecisionPlan] = []
    waiting = threading.Thread(
        target=lambda: plans.append(measured_plan(sites, cache_dir=cache_dir, timer=fake_timer(calls)))
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "held").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        waiting.start()
        assert blocked.wait(timeout=60)
        write_cached(cache_dir, recurrent, theirs.timings["lstm.layers.0.recurrent"])
    finally:
        (tmp_path / "release").touch()
        assert holder.wait(timeout=60) == 0
    waiting.join(timeout=60)
    assert not calls and len(plans) == 1
    for name, modes in plans[0].modes.items():
        assert modes == (theirs.modes[name] if keys[name] == recurrent else ((1, "fp32"),)), name


def test_a_process_that_waits_does_not_slip_in_between_the_products_another_times(
    bilm, cache_dir, monkeypatch
) -> None:
    """One side times the model and pauses between two products (a descheduled process does);
    the other starts meanwhile, finds the first product's timing under way and waits: it must
    not find the second product free and uncached in that pause and run it in fp32, but wait for
    the whole model and end with the same plan. (Two threads: a `FileLock` per thread holds a file
    lock of its own, as two processes do.) With a lock per product only, it slipped in."""
    sites = bilm.product_sites()
    first_timing, waiting_started, waiter_done = threading.Event(), threading.Event(), threading.Event()

    class ReportingLock(FileLock):
        def acquire(self, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
            if timeout:
                waiting_started.set()
            return super().acquire(timeout, *args, **kwargs)

    timer = fake_timer([])

    def first_timer(measurement: Measurement) -> float:
        first_timing.set()
        assert waiting_started.wait(timeout=60)  # the other side waits before the first call ends
        return timer(measurement)

    timed_products = 0
    under_lock = auto_precision.timings_under_lock

    def pausing_between_products(*args: Any) -> Any:
        nonlocal timed_products
        found = under_lock(*args)
        if threading.current_thread().name == "first" and timed_products == 0:
            waiter_done.wait(timeout=3)  # long enough for a waiter that slips in to finish
        timed_products += threading.current_thread().name == "first"
        return found

    monkeypatch.setattr(auto_precision, "FileLock", ReportingLock)
    monkeypatch.setattr(auto_precision, "timings_under_lock", pausing_between_products)
    plans: dict[str, auto_precision.PrecisionPlan] = {}

    def plan(name: str, timer: auto_precision.Timer) -> None:
        plans[name] = measured_plan(sites, cache_dir=cache_dir, timer=timer)
        if name == "second":
            waiter_done.set()

    first = threading.Thread(target=plan, args=("first", first_timer), name="first")
    first.start()
    assert first_timing.wait(timeout=60)
    second = threading.Thread(target=plan, args=("second", timer), name="second")
    second.start()
    first.join(timeout=120)
    second.join(timeout=120)
    assert set(plans) == {"first", "second"}
    assert plans["second"].modes == plans["first"].modes
    assert plans["first"].reduces() and not plans["second"].timings.keys() - plans["first"].timings.keys()
