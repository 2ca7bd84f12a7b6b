"""What machine a benchmark ran on (CPU model and the flags that decide its fast paths) and its
limits: the matrix-product rate of each precision and the memory read bandwidth."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from spacy_elmo.bilm import torch_probes
from spacy_elmo.bilm.precision import bf16_linear, int8_linear

RELEVANT_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_name() -> str:
    """ "MODEL (flags: ...)", listing only `RELEVANT_FLAGS`."""
    present = [flag for flag in RELEVANT_FLAGS if flag in torch_probes.cpu_flags()]
    wanted = " ".join(present) or "none of " + "/".join(RELEVANT_FLAGS)
    return f"{torch_probes.cpu_model_name()} (flags: {wanted})"


def fix_threads(threads: int) -> None:
    """Run torch on `threads` threads for the whole benchmark: also when that is torch's default
    count, which the biLM's thread policy would otherwise adapt to the machine's load."""
    os.environ["SPACY_ELMO_THREADS"] = "fixed"
    torch.set_num_threads(threads)


def machine_line(threads: int) -> str:
    """One line for a benchmark's header: CPU, torch version, threads."""
    return f"CPU: {cpu_name()}; torch {torch.__version__}; {threads} threads"


BYTES_PER_VALUE = {"fp32": 4, "bf16": 2, "int8": 1}
"""Bytes of one weight in each precision's copy."""


def best_seconds(call: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` calls, after one warm-up call."""
    call()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


MODES = ("fp32", "bf16", "int8")


def product_peaks(
    modes: Iterable[str] = MODES, rows: int = 1024, width: int = 2048, repeats: int = 5
) -> dict[str, float]:
    """GFLOP/s of a (rows x width) @ (width x width) product in each of `modes`, through the
    kernels the biLM uses: `torch.mm` for fp32, `bf16_linear` and `int8_linear` for the others."""
    torch.manual_seed(0)
    inputs, weight = torch.randn(rows, width), torch.randn(width, width) / width**0.5
    reduced = {"bf16": bf16_linear, "int8": int8_linear}  # each makes its weight copy when called

    def kernel(mode: str) -> Callable[[], object]:
        if mode == "fp32":
            return functools.partial(torch.mm, inputs, weight)
        return functools.partial(reduced[mode](weight, None), inputs)

    flops = 2 * rows * width * width
    with torch.no_grad():
        return {mode: flops / best_seconds(kernel(mode), repeats) / 1e9 for mode in MODES if mode in modes}


CACHED_MEGABYTES = 32
"""A weight matrix small enough for a large last-level cache to keep between calls."""
STEP_MEGABYTES = 168
"""The recurrent and projection weights of every layer and direction of the original shape: what
one LSTM step at one row reads."""


def one_row_rate(repeats: int = 5, width: int = 4096) -> float:
    """GB/s of weights one row can read: the best of `x @ w` over a `CACHED_MEGABYTES` matrix
    that a cache keeps, and `x @ w`, `torch.mv` and a plain read (a sum) over
    `STEP_MEGABYTES`: the fastest a batch-1 LSTM step could go, an upper bound."""
    rates = []
    with torch.no_grad():
        for megabytes in (CACHED_MEGABYTES, STEP_MEGABYTES):
            weight = torch.randn(megabytes * 2**20 // 4 // width, width)
            row, column = torch.randn(1, weight.shape[0]), torch.randn(width)
            calls = [functools.partial(torch.mm, row, weight)]
            if megabytes == STEP_MEGABYTES:
                calls += [functools.partial(torch.mv, weight, column), weight.sum]
            rates += [weight.numel() * 4 / best_seconds(call, repeats) / 1e9 for call in calls]
    return max(rates)


@dataclass(frozen=True)
class Limits:
    """What the machine reached at one moment: product GFLOP/s by precision and the one-row
    bound's GB/s, `one_row_rate` (none measured: on a GPU)."""

    peaks: dict[str, float] = field(default_factory=dict)
    bandwidth: float = float("nan")


def measure_limits(batch_size: int | None = None, modes: Iterable[str] = MODES) -> Limits:
    """The limits a cell is held to, quickly (best of 2 calls), so that they can be measured
    again beside every repetition: the one-row bound for one sentence per batch, the product
    peaks of `modes` (fp32 always) for more; both when `batch_size` is None (5 calls each)."""
    if batch_size is None:
        return Limits(product_peaks(), one_row_rate())
    if batch_size == 1:
        return Limits(bandwidth=one_row_rate(repeats=2))
    return Limits(product_peaks({"fp32", *modes}, repeats=2))
