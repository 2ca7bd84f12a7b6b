"""precision = "auto": time every product in each mode on this machine and keep the fastest.

CPU flags do not tell what is fast: one Xeon reports bf16 support and runs a bf16 product 5x
slower than float32; on a CPU without AVX-512 bf16 is emulated. So "auto" times each distinct
product of the model (its own weights and shapes) in float32, bf16 and int8 at the row counts
it typically sees (one sentence, a batch), and at each row count keeps a reduced mode only where
it is faster than float32 by more than `MIN_GAIN`: the plan never makes a product slower than
the exact one. A product then runs inputs in the mode of the nearest row count timed (int8 for
a batch's 64-row LSTM steps and fp32 for one sentence's one-row steps, where that was measured).

Timing is bounded: about `BUDGET_SECONDS` for the whole model, largest products first; once
it is spent, the products not timed yet stay float32 and a later process times them. It is
done once per machine: each product's times are kept in the cache, keyed by the CPU (model name
and flags), the torch version, the thread count and the product's shape, and written atomically.
Processes that start "auto" at once (`n_process` workers, Ray actors, grid jobs) do not time on
the machine they make busy together, and end with one plan: one times the model's products under
a lock of the model and each product under that product's lock (`filelock` locks beside the
cache files); a process that had to wait for a lock times nothing itself, reads what the one it
waited for cached and runs the rest in float32.
Timings judged too noisy (`NOISY`) choose float32 and are not cached: the next process to start
alone times them again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock, Timeout

from . import torch_probes
from .errors import ConfigError
from .io.atomic import atomic_write_text
from .io.cache_home import cache_root
from .precision import (
    FP32,
    REDUCED_MODES,
    Precision,
    ProductModes,
    ProductSite,
    ReducedProduct,
    mode_for_rows,
)

logger = logging.getLogger(__name__)

BUDGET_SECONDS = 3.0
"""Time spent measuring, for the whole model, when nothing is cached."""
MIN_GAIN = 1.1
"""A reduced mode must be this many times as fast as float32 at a row count to run there: a
smaller gain is within the run-to-run noise of a shared machine."""
MIN_ROUNDS, MAX_ROUNDS = 5, 40
"""Timed calls per mode and row count (interleaved), however small or large the budget."""
HOPELESS = 2.0
"""A reduced mode whose faster of two calls (warm-up, first round) takes this many times
float32's is dropped: noise does not turn that into the 10% gain `MIN_GAIN` asks for."""
NOISY = 1.25
"""Float32's median call over its best one at any row count above which the machine was too busy
for the timings to choose a mode: the product runs in float32 and the next process times it
again (a plan chosen by noise would differ between processes that start together). On an idle
2-vCPU EPYC the ratio was 1.01-1.10 for every product of the original shape."""
NOISE_FLOOR_SECONDS = 2e-4
"""Float32 calls faster than this are not judged by `NOISY`: the clock's and the caches' jitter
moves them by more, and such a product costs little whatever its mode."""
LOCK_WAIT_SECONDS = 120.0
"""How long a process waits for another one timing a product (or a model); past it, what is not
cached runs in float32 in this process (and is timed by a later one)."""
CACHE_VERSION = 3
"""Raised whenever a mode's kernels change, so that times measured with the old ones are not
reused (2: float32 LSTM products of a few rows on packed weights; 3: every large float32 weight
packed, one-row projections on transposed copies)."""
CACHE_FOLDER = "precision"
REDUCED_FAILURES = (RuntimeError, NotImplementedError)
"""What torch raises where a reduced kernel cannot run (a missing or unsupported kernel)."""


@dataclass
class ProductTimings:
    """One product's measured times, by mode and row count: the best seconds per call, and the
    median over rounds of the mode's time relative to float32's in the same round (robust to
    a machine that slows down for a while: both calls of a round see the same spell)."""

    best: dict[str, dict[int, float]]
    relative: dict[str, dict[int, float]]
    fp32_spread: float = 1.0
    """The largest median / best of float32's calls over the row counts (not cached: only
    timings under `NOISY` are)."""

    def gains(self, mode: str, n_rows: int) -> bool:
        """Whether `mode` beat float32 by `MIN_GAIN` at `n_rows`, both at best and typically."""
        best, relative = self.best.get(mode, {}).get(n_rows), self.relative.get(mode, {}).get(n_rows)
        if best is None or relative is None:
            return False
        return relative * MIN_GAIN <= 1.0 and best * MIN_GAIN <= self.best["fp32"][n_rows]

    def modes_by_rows(self) -> ProductModes:
        """At each row count timed, the reduced mode that gains there and has the smallest time
        relative to float32, else fp32; equal neighbours merged. fp32 for too noisy timings."""
        if self.fp32_spread > NOISY:
            return FP32
        chosen: list[tuple[int, Precision]] = []
        for n_rows in self.rows():
            winners = [mode for mode in REDUCED_MODES if self.gains(mode, n_rows)]
            mode = min(winners, key=lambda mode: self.relative[mode][n_rows], default="fp32")
            if not chosen or chosen[-1][1] != mode:
                chosen.append((n_rows, mode))
        return tuple(chosen)

    def rows(self) -> list[int]:
        """The row counts timed, fewest first."""
        return sorted(self.best["fp32"])

    def describe(self, n_rows: int, mode: str) -> str:
        """`mode`'s best time at `n_rows` against float32's, in words."""
        milliseconds = {name: self.best[name][n_rows] * 1e3 for name in (mode, "fp32")}
        return f"{n_rows} rows {mode} {milliseconds[mode]:.3g} ms (fp32 {milliseconds['fp32']:.3g})"

    def to_json(self) -> dict[str, Any]:
        return {"best": self.best, "relative": self.relative}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> ProductTimings:
        def table(name: str) -> dict[str, dict[int, float]]:
            return {
                str(mode): {int(rows): float(value) for rows, value in by_rows.items()}
                for mode, by_rows in record[name].items()
            }

        timings = cls(table("best"), table("relative"))
        if not timings.best.get("fp32"):
            raise ValueError("no float32 times")
        return timings


@dataclass(frozen=True)
class Measurement:
    """One timed call: which product (its cache key), in which mode, at how many rows."""

    product: str
    mode: Precision
    rows: int
    call: Callable[[], Any]


Timer = Callable[[Measurement], float]
"""Runs a measurement and returns its seconds (tests pass a fake one)."""


def perf_counter_timer(measurement: Measurement) -> float:
    """Seconds of one call by the wall clock."""
    start = time.perf_counter()
    measurement.call()
    return time.perf_counter() - start


@dataclass
class PrecisionPlan:
    """The modes of every product of a model, and for "auto" the times that chose them."""

    modes: dict[str, ProductModes]
    timings: dict[str, ProductTimings] = field(default_factory=dict)
    """product name -> its timings (only where measured or read from the cache)."""

    def reduces(self) -> bool:
        """Whether any product runs in a reduced precision (then autograd is refused)."""
        return any(mode != "fp32" for modes in self.modes.values() for _, mode in modes)

    def lines(self) -> list[str]:
        """One line per product: its name and mode, and in a measured plan each row count timed
        with its mode's best time against float32's (or that it was not timed yet)."""
        width = max((len(name) for name in self.modes), default=0)
        lines = []
        for name, modes in self.modes.items():
            timings = self.timings.get(name)
            line = f"{name:<{width}}  {' / '.join(mode for _, mode in modes)}"
            if timings:
                line += "  " + ", ".join(
                    timings.describe(rows, mode_for_rows(modes, rows)) for rows in timings.rows()
                )
                if timings.fp32_spread > NOISY:
                    line += f"; too noisy to choose (fp32 calls varied {timings.fp32_spread:.2f}x)"
            elif self.timings:
                line += "  not timed yet: the timing budget ran out (a later process times it)"
            lines.append(line)
        return lines


def uniform_plan(mode: Precision, sites: Mapping[str, ProductSite]) -> PrecisionPlan:
    """Every product at `mode`, or float32 where a product has no such mode (int8 convolutions)."""
    return PrecisionPlan(
        {name: ((1, mode if mode in site.modes else "fp32"),) for name, site in sites.items()}
    )


def measured_plan(
    sites: Mapping[str, ProductSite],
    *,
    cache_dir: Path | None,
    timer: Timer | None = None,
    budget_seconds: float | None = None,
) -> PrecisionPlan:
    """Time every distinct product (or read its times from `cache_dir`) and choose its modes.

    Products with the same shape and kind (the layers of an LSTM stack) are timed once, each
    under its lock in `cache_dir` (`timings_under_lock`). Runs without autograd; `cache_dir` None
    measures every time and writes nothing. `timer` runs and times one call (default:
    `perf_counter_timer`); `budget_seconds` defaults to `BUDGET_SECONDS`.
    """
    timer = timer or perf_counter_timer
    budget_seconds = BUDGET_SECONDS if budget_seconds is None else budget_seconds
    keys = {name: product_key(site) for name, site in sites.items()}
    distinct: dict[str, ProductSite] = {}
    for name, key in keys.items():
        distinct.setdefault(key, sites[name])
    cached = {key: read_cached(cache_dir, key) for key in distinct} if cache_dir is not None else {}
    timings = {key: found for key, found in cached.items() if found is not None}
    to_measure = sorted(
        (key for key in distinct if key not in timings),
        key=lambda key: (-distinct[key].parameters[0].numel(), min(distinct[key].rows)),
    )  # the largest products first, and of equal ones the LSTM's step products (timed at one row):
    # they matter most if the budget runs out
    budget = Budget(
        budget_seconds, budget_seconds / max(1, sum(len(distinct[key].rows) for key in to_measure))
    )
    with torch.no_grad(), measuring_turn(cache_dir if to_measure else None, list(distinct), budget):
        for key in to_measure:
            found = timings_under_lock(key, distinct[key], cache_dir, timer, budget)
            if found is not None:
                timings[key] = found
    untimed = [name for name in sites if keys[name] not in timings]
    if untimed:
        logger.info(
            "precision 'auto': %s; %d products stay fp32 until a later process times them.",
            "another process timed this model and left them"
            if budget.waited
            else f"the timing budget ({budget_seconds:.1f} s) ran out",
            len(untimed),
        )
    return PrecisionPlan(
        {name: timings[keys[name]].modes_by_rows() if keys[name] in timings else FP32 for name in sites},
        {name: timings[keys[name]] for name in sites if keys[name] in timings},
    )


@contextlib.contextmanager
def measuring_turn(cache_dir: Path | None, keys: list[str], budget: Budget) -> Iterator[None]:
    """Hold the lock of a model (the keys of all its products) while timing them, after waiting
    (`LOCK_WAIT_SECONDS` at most) for another process that holds it: that one times them all
    before this one reads a single result (then `Budget.waited`: it times nothing).

    Each product also has its own lock (`timings_under_lock`), which alone let a waiting process
    slip in between another's products: it found the next product unlocked and not yet cached, ran
    it in float32, and ended with another plan than the process that timed it a moment later.
    """
    if cache_dir is None:
        yield
        return
    lock = None
    try:
        lock = taken_turn(cache_dir, json.dumps(sorted(keys)), budget)
    except Timeout:
        logger.warning(
            "precision 'auto': another process has been timing this model's products for %.0f s; "
            "those it has not cached run in fp32 here.",
            LOCK_WAIT_SECONDS,
        )
    except OSError:  # a read-only cache: each product is timed without a lock
        pass
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def taken_turn(cache_dir: Path, key: str, budget: Budget) -> FileLock:
    """The lock of `key` (a product, or a whole model) in `cache_dir`, held: taken at once, or
    after waiting for the process that holds it, which sets `Budget.waited`. Raises `Timeout`
    past `LOCK_WAIT_SECONDS`, and `OSError` where the cache cannot be written."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_file(cache_dir, key))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        budget.waited = True
        lock.acquire(timeout=LOCK_WAIT_SECONDS)
    return lock


def timings_under_lock(
    key: str, site: ProductSite, cache_dir: Path | None, timer: Timer, budget: Budget
) -> ProductTimings | None:
    """A product's timings, read from the cache or timed and cached under the product's lock.

    A process that finds the lock held waits for it (`LOCK_WAIT_SECONDS` at most), reads the
    timings its holder cached, and from then on times nothing (`Budget.waited`): what the others
    did not cache runs in float32, as in their plan. None where nothing was read or timed.
    """
    if cache_dir is None:
        return timed_and_cached(key, site, None, timer, budget) if budget.can_time() else None
    try:
        lock = taken_turn(cache_dir, key, budget)
    except Timeout:
        logger.warning(
            "precision 'auto': another process has been timing a %s product for %.0f s; it runs in "
            "fp32 here.",
            site.kind,
            LOCK_WAIT_SECONDS,
        )
        return None
    except OSError as error:  # a read-only cache: time without a lock, as without a cache
        logger.info("precision 'auto' times without a lock: %s (%s).", cache_dir, error)
        return timed_and_cached(key, site, cache_dir, timer, budget) if budget.can_time() else None
    try:
        found = read_cached(cache_dir, key)
        if found is None and budget.can_time():
            found = timed_and_cached(key, site, cache_dir, timer, budget)
        return found
    finally:
        lock.release()


def timed_and_cached(
    key: str, site: ProductSite, cache_dir: Path | None, timer: Timer, budget: Budget
) -> ProductTimings:
    """Time a product and cache its timings, unless float32's calls varied more than `NOISY`."""
    timings = time_product(key, site, timer, budget)
    if timings.fp32_spread > NOISY:
        logger.info(
            "precision 'auto': the machine was busy while a %s product was timed (float32's calls "
            "varied %.2fx): it runs in fp32, and the next process times it again.",
            site.kind,
            timings.fp32_spread,
        )
    elif cache_dir is not None:
        write_cached(cache_dir, key, timings)
    return timings


@dataclass
class Budget:
    """Seconds of timed calls left for the whole model, and the share each row count aims at."""

    left: float
    share: float
    waited: bool = False
    """Whether this process waited for another one's lock: it then times nothing more."""

    def can_time(self) -> bool:
        return self.left > 0 and not self.waited


def time_product(key: str, site: ProductSite, timer: Timer, budget: Budget) -> ProductTimings:
    """Time each mode at each of the site's row counts, fewest rows first: at least `MIN_ROUNDS`
    calls of each mode, more while the row count's share of the budget and the budget last.

    The modes take turns call by call, so that a slow spell of the machine hits them alike. A
    mode `HOPELESS`ly slower at a row count's warm-up and first round is not timed further at
    that row count (one slow call is not enough: a busy spell can hit one mode's call alone).
    Float32 is called once before its warm-up: its first call at a row count may pack the weight
    (`products.WeightCopies`), which took 7x its later calls. A reduced mode whose copies or
    first call make torch raise is left out for this product (`warn_reduced_failure`).
    """
    timings = ProductTimings({"fp32": {}}, {"fp32": {}})
    candidates = [
        mode for mode in site.modes if mode == "bf16" or (mode == "int8" and torch_probes.int8_supported())
    ]  # without int8 kernels, "int8" is float32 again (`precision.int8_linear`): nothing to time
    products: dict[Precision, ReducedProduct] = {}
    for mode in candidates:
        product = ReducedProduct(mode, site.source, site.parameters)
        try:
            product.prepare()  # the reduced copies are made once, not timed
        except REDUCED_FAILURES as error:
            warn_reduced_failure(site, mode, error)
            continue
        products[mode] = product

    def timed(mode: Precision, n_rows: int, call: Callable[[], Any]) -> float:
        seconds = timer(Measurement(key, mode, n_rows, call))
        budget.left -= seconds
        return seconds

    for n_rows in sorted(site.rows):
        inputs = site.inputs(n_rows)
        calls = {mode: _call(site, inputs, products.get(mode)) for mode in ("fp32", *products)}
        timed("fp32", n_rows, calls["fp32"])
        warm_up = {"fp32": timed("fp32", n_rows, calls["fp32"])}
        for mode in list(products):
            try:
                warm_up[mode] = timed(mode, n_rows, calls[mode])
            except REDUCED_FAILURES as error:  # not timed any further, at any row count
                warn_reduced_failure(site, mode, error)
                del products[mode], calls[mode]
        modes: list[Precision] = list(calls)
        first_round = {mode: timed(mode, n_rows, calls[mode]) for mode in modes}
        fastest = {mode: min(warm_up[mode], first_round[mode]) for mode in modes}
        modes = [mode for mode in modes if fastest[mode] <= HOPELESS * fastest["fp32"]]
        seconds: dict[str, list[float]] = {mode: [first_round[mode]] for mode in modes}
        spent = sum(first_round[mode] for mode in modes)
        while len(seconds["fp32"]) < MIN_ROUNDS or (
            spent < budget.share and budget.left > 0 and len(seconds["fp32"]) < MAX_ROUNDS
        ):
            for mode in modes:
                seconds[mode].append(timed(mode, n_rows, calls[mode]))
                spent += seconds[mode][-1]
        for mode, runs in seconds.items():
            ratios = [run / fp32 for run, fp32 in zip(runs, seconds["fp32"])]
            timings.best.setdefault(mode, {})[n_rows] = min(runs)
            timings.relative.setdefault(mode, {})[n_rows] = statistics.median(ratios)
        if min(seconds["fp32"]) >= NOISE_FLOOR_SECONDS:
            spread = statistics.median(seconds["fp32"]) / min(seconds["fp32"])
            timings.fp32_spread = max(timings.fp32_spread, spread)
    return timings


def warn_reduced_failure(site: ProductSite, mode: Precision, error: Exception) -> None:
    """Say that a product's reduced mode failed while "auto" made or timed it: the mode is left
    out for that product, which runs in one of the others, and "auto" goes on."""
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    logger.warning(
        "precision 'auto': a %s product in %s fails on this machine (%s): it runs in another mode.",
        site.kind,
        mode,
        reason,
    )


def _call(site: ProductSite, inputs: torch.Tensor, reduced: ReducedProduct | None) -> Callable[[], Any]:
    return lambda: site.run(inputs, reduced)


def product_key(site: ProductSite) -> str:
    """What a product's timings depend on: machine, torch, threads, kind, shape, rows, modes."""
    weight = site.parameters[0]
    return json.dumps(
        {
            "cpu": torch_probes.cpu_identity(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "device": str(weight.device),
            "kind": site.kind,
            "shape": list(site.weight_shape()),
            "rows": list(site.rows),
            "modes": list(site.modes),
        },
        sort_keys=True,
    )


def default_cache_dir() -> Path | None:
    """`precision/` in spacy-elmo's cache (`$SPACY_ELMO_CACHE`, else the user cache folder), or
    None, with a warning, where that cache cannot be (a file in its place): "auto" then times
    without a cache, as with a read-only one, rather than fail."""
    try:
        return cache_root() / CACHE_FOLDER
    except ConfigError as error:
        logger.warning("precision 'auto' times this model again in every process, keeping nothing: %s", error)
        return None


def cache_file(cache_dir: Path, key: str) -> Path:
    return cache_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def lock_file(cache_dir: Path, key: str) -> Path:
    """The lock a process holds while it times the product (or the model) of `key` (the OS frees
    it when its process ends, however it ends)."""
    return cache_file(cache_dir, key).with_suffix(".lock")


def read_cached(cache_dir: Path, key: str) -> ProductTimings | None:
    """A product's cached timings, or None where there are none (or the file is unreadable or
    another version's: the product is then timed again and the file replaced)."""
    path = cache_file(cache_dir, key)
    try:
        record = json.loads(path.read_text(encoding="utf8"))
        if record["version"] != CACHE_VERSION or record["key"] != key:
            return None
        return ProductTimings.from_json(record)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        logger.info("Timing again: the cached precision timings in %s are unreadable (%s).", path, error)
        return None


def write_cached(cache_dir: Path, key: str, timings: ProductTimings) -> None:
    """Write a product's timings and its chosen mode atomically; a cache that cannot be written
    costs a measurement in the next process, nothing more."""
    record = {"version": CACHE_VERSION, "key": key, "chosen": timings.modes_by_rows(), **timings.to_json()}
    try:
        atomic_write_text(cache_file(cache_dir, key), json.dumps(record, indent=1) + "\n")
    except OSError as error:
        logger.warning(
            "Could not cache precision timings in %s (%s): they are timed again next time.", cache_dir, error
        )
