"""Where a biLM's inference time goes: each kind of matrix product's share of the time, and the
rate it reached against the machine's limits measured in the same run.

    python bench/profile_bilm.py                                  # original, exact, one sentence per batch
    python bench/profile_bilm.py --config small --batch-size 64 --sentences 64
    python bench/profile_bilm.py --precision auto

Random weights in a preset's shape (speed does not depend on the values) on real sentences (UD
EWT dev), every run with an empty type cache. Each product function of `spacy_elmo.bilm` is
timed where the modules call it; "everything else" is the rest of the run (gates, cell state,
clipping, char embedding and pooling, batching, copies). A product's "read" rate is the bytes of
its weight (in the precision it ran in) over its time; its GFLOP/s counts 2 per multiply-add.
The limits are measured just before every run, and the medians are printed.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bilm import EWT_DEV, read_conllu_sentences  # noqa: E402
from machine import BYTES_PER_VALUE, fix_threads, machine_line, measure_limits  # noqa: E402

from spacy_elmo.bilm import PRESETS, BiLM, lstm, token_encoder  # noqa: E402
from spacy_elmo.bilm.precision import PRECISION_CHOICES, for_inputs  # noqa: E402


@dataclass(frozen=True)
class Part:
    """A product function as one module calls it (its arguments `inputs`, `reduced` and
    `weight`, or `layer` for `linear`, whose weight is an `nn.Linear`'s (O, K))."""

    label: str
    module: ModuleType
    function: str


PARTS = (
    Part("char convolutions", token_encoder, "matmul"),
    Part("highways and token projection", token_encoder, "linear"),
    Part("LSTM input products (all positions at once)", lstm, "stacked_linear"),
    Part("LSTM recurrent products (every step)", lstm, "stacked_accumulate"),
    Part("LSTM projections (every step)", lstm, "stacked_matmul"),
)
OVERHEAD = "profiling itself"


@dataclass
class Tally:
    calls: int = 0
    seconds: float = 0.0
    bytes_read: float = 0.0
    flops: float = 0.0


def timed(part: Part, original: Callable, tallies: dict[str, Tally]) -> Callable:
    """`original`, adding each call's time, weight bytes and FLOPs to `tallies[part.label]`."""

    signature = inspect.signature(original)

    def call(*args, **kwargs):
        start = time.perf_counter()
        result = original(*args, **kwargs)
        seconds = time.perf_counter() - start
        arguments = signature.bind(*args, **kwargs).arguments
        inputs, reduced = arguments["inputs"], arguments.get("reduced")
        weight = arguments["layer"].weight.T if "layer" in arguments else arguments["weight"]
        product = for_inputs(reduced, inputs)
        mode = "fp32" if product is None else product.precision
        *directions, width, outputs = weight.shape
        rows = inputs.numel() // width  # every direction's rows, or every window of a convolution
        tally = tallies[part.label]
        tally.calls += 1
        tally.seconds += seconds
        tally.bytes_read += weight.numel() * BYTES_PER_VALUE[mode]
        tally.flops += 2 * rows * width * outputs
        tallies[OVERHEAD].seconds += time.perf_counter() - start - seconds
        return result

    return call


def profile_runs(run: Callable[[], None], runs: int) -> tuple[dict[str, Tally], float]:
    """Tallies per part summed over `runs` runs, and the runs' total seconds."""
    tallies: dict[str, Tally] = defaultdict(Tally)
    originals = {part: getattr(part.module, part.function) for part in PARTS}
    for part, original in originals.items():
        setattr(part.module, part.function, timed(part, original, tallies))
    total = 0.0
    try:
        for _ in range(runs):
            start = time.perf_counter()
            run()
            total += time.perf_counter() - start
    finally:
        total -= tallies.pop(OVERHEAD, Tally()).seconds
        for part, original in originals.items():
            setattr(part.module, part.function, original)
    return tallies, total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="original", choices=sorted(PRESETS))
    parser.add_argument("--precision", default="fp32", choices=PRECISION_CHOICES)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fix_threads(args.threads)
    torch.manual_seed(0)
    bilm = BiLM(PRESETS[args.config]).eval().set_precision(args.precision)
    sentences = read_conllu_sentences(EWT_DEV, args.sentences)
    n_tokens = sum(len(sentence) for sentence in sentences)

    def run() -> None:
        bilm.clear_token_cache()
        bilm.embed_sentences(sentences, batch_size=args.batch_size)

    run()  # warm-up: first-call allocations, reduced copies
    limits = [measure_limits() for _ in range(2)]
    tallies, total = profile_runs(run, args.runs)
    limits += [measure_limits() for _ in range(2)]
    bandwidth = statistics.median(limit.bandwidth for limit in limits)
    peak = statistics.median(limit.peaks["fp32"] for limit in limits)
    print(machine_line(args.threads))
    print(
        f"{args.config}, precision {args.precision}, batch size {args.batch_size}: {len(sentences)} "
        f"sentences, {n_tokens} tokens, {n_tokens + 2 * len(sentences)} positions; {args.runs} runs, "
        f"{n_tokens * args.runs / total:,.1f} tokens/s"
    )
    print(f"Limits (median of 4, around the runs): read {bandwidth:.1f} GB/s, fp32 {peak:,.0f} GFLOP/s\n")
    print(
        "| part | calls per run | ms per run | share | read GB/s | of read limit | GFLOP/s | of fp32 peak |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for part in PARTS:
        tally = tallies.get(part.label)
        if tally is None:
            continue
        read, rate = tally.bytes_read / tally.seconds / 1e9, tally.flops / tally.seconds / 1e9
        print(
            f"| {part.label} | {tally.calls / args.runs:,.0f} | {tally.seconds / args.runs * 1e3:,.1f} "
            f"| {tally.seconds / total:.0%} | {read:.1f} | {read / bandwidth:.0%} "
            f"| {rate:.1f} | {rate / peak:.0%} |"
        )
    rest = total - sum(tally.seconds for tally in tallies.values())
    print(f"| everything else | - | {rest / args.runs * 1e3:,.1f} | {rest / total:.0%} | | | | |")
    print(f"| total | - | {total / args.runs * 1e3:,.1f} | 100% | | | | |")


if __name__ == "__main__":
    main()
