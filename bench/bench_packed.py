"""Exact fp32 with and without the weight copies (`products.WeightCopies`: oneDNN's packed
copies, transposed LSTM projections), side by side in one process.

    python bench/bench_packed.py                          # original, batch 1, 8 and 64
    python bench/bench_packed.py --config small --batch-sizes 64

Random weights in a preset's shape, UD EWT dev sentences, every repetition with an empty type
cache; the two sides take turns repetition by repetition (the plain side sets
`products.PACKED_MIN_VALUES` and `products.TRANSPOSED_MIN_VALUES` past every weight, so nothing is
copied). Prints real tokens/s (max / median) and the median of each repetition's copies / plain
ratio. With `--rss`, also each side's peak resident memory: a fresh process per side and batch
size (spawned) that builds the model, embeds the sentences once and reads its peak (VmHWM).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bilm import EWT_DEV, read_conllu_sentences  # noqa: E402
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.bilm import PRESETS, BiLM, products  # noqa: E402

NEVER = 2**62
"""A `PACKED_MIN_VALUES` and `TRANSPOSED_MIN_VALUES` no weight reaches."""
THRESHOLDS = ("PACKED_MIN_VALUES", "TRANSPOSED_MIN_VALUES")


def use_copies(copies: bool, defaults: dict[str, int]) -> None:
    """Set the thresholds for the side with copies (their defaults) or without (past every weight)."""
    for name, default in defaults.items():
        setattr(products, name, default if copies else NEVER)


def peak_rss_mb(config: str, batch_size: int, n_sentences: int, threads: int, copies: bool) -> float:
    """Peak resident MB of a process that builds the model and embeds the sentences once."""
    fix_threads(threads)
    use_copies(copies, {name: getattr(products, name) for name in THRESHOLDS})
    torch.manual_seed(0)
    bilm = BiLM(PRESETS[config]).eval()
    bilm.embed_sentences(read_conllu_sentences(EWT_DEV, n_sentences), batch_size=batch_size)
    # VmHWM, not ru_maxrss: the latter survives exec, so a spawned child would report its parent's
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="original", choices=sorted(PRESETS))
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 8, 64])
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rss", action="store_true", help="also each side's peak RSS (a process each)")
    args = parser.parse_args()
    fix_threads(args.threads)
    torch.manual_seed(0)
    bilm = BiLM(PRESETS[args.config]).eval()
    sentences = read_conllu_sentences(EWT_DEV, args.sentences)
    n_tokens = sum(len(sentence) for sentence in sentences)
    defaults = {name: getattr(products, name) for name in THRESHOLDS}
    print(f"{machine_line(args.threads)}; {args.config}, exact fp32, {len(sentences)} sentences")
    rss_header = " peak RSS MB copies / plain |" if args.rss else ""
    print(f"\n| batch | copies tokens/s | plain tokens/s | copies / plain |{rss_header}")
    print("|---|---|---|---|" + ("---|" if args.rss else ""))
    for batch_size in args.batch_sizes:
        seconds: dict[str, list[float]] = {"copies": [], "plain": []}
        for _ in range(args.repeats + 1):  # the first round warms up (and makes the copies)
            for side, runs in seconds.items():
                use_copies(side == "copies", defaults)
                bilm.clear_token_cache()
                start = time.perf_counter()
                bilm.embed_sentences(sentences, batch_size=batch_size)
                runs.append(time.perf_counter() - start)
        use_copies(True, defaults)
        copied, plain = (runs[1:] for runs in seconds.values())
        speeds = [
            f"{n_tokens / min(runs):,.0f} / {n_tokens / statistics.median(runs):,.0f}"
            for runs in (copied, plain)
        ]
        ratio = statistics.median(base / own for own, base in zip(copied, plain))
        rss = ""
        if args.rss:
            peaks = [
                spawned(peak_rss_mb, args.config, batch_size, args.sentences, args.threads, copies)
                for copies in (True, False)
            ]
            rss = f" {peaks[0]:,.0f} / {peaks[1]:,.0f} |"
        print(f"| {batch_size} | {speeds[0]} | {speeds[1]} | {ratio:.2f}x |{rss}", flush=True)


def spawned(function: Callable[..., float], *arguments: object) -> float:
    """`function(*arguments)` in a fresh spawned process (its memory is its own)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, arguments)


if __name__ == "__main__":
    main()
