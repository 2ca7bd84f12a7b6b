"""Exact fp32 with and without the weight copies (`products.WeightCopies`: oneDNN's packed
copies, transposed LSTM projections), side by side in one process.

    python bench/bench_packed.py                          # original, batch 1, 8 and 64
    python bench/bench_packed.py --config small --batch-sizes 64

Random weights in a preset's shape, UD EWT dev sentences, every repetition with an empty type
cache; the two sides take turns repetition by repetition (the plain side sets
`products.PACKED_MIN_VALUES` and `products.TRANSPOSED_MIN_VALUES` past every weight, so nothing is
copied). Prints real tokens/s (max / median) and the median of each repetition's copies / plain
ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bilm import EWT_DEV, read_conllu_sentences  # noqa: E402
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.bilm import PRESETS, BiLM, products  # noqa: E402

NEVER = 2**62
"""A `PACKED_MIN_VALUES` and `TRANSPOSED_MIN_VALUES` no weight reaches."""
THRESHOLDS = ("PACKED_MIN_VALUES", "TRANSPOSED_MIN_VALUES")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="original", choices=sorted(PRESETS))
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 8, 64])
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fix_threads(args.threads)
    torch.manual_seed(0)
    bilm = BiLM(PRESETS[args.config]).eval()
    sentences = read_conllu_sentences(EWT_DEV, args.sentences)
    n_tokens = sum(len(sentence) for sentence in sentences)
    defaults = {name: getattr(products, name) for name in THRESHOLDS}
    print(f"{machine_line(args.threads)}; {args.config}, exact fp32, {len(sentences)} sentences")
    print("\n| batch | copies tokens/s | plain tokens/s | copies / plain |")
    print("|---|---|---|---|")
    for batch_size in args.batch_sizes:
        seconds: dict[str, list[float]] = {"copies": [], "plain": []}
        for _ in range(args.repeats + 1):  # the first round warms up (and makes the copies)
            for side, runs in seconds.items():
                for name, default in defaults.items():
                    setattr(products, name, default if side == "copies" else NEVER)
                bilm.clear_token_cache()
                start = time.perf_counter()
                bilm.embed_sentences(sentences, batch_size=batch_size)
                runs.append(time.perf_counter() - start)
        for name, default in defaults.items():
            setattr(products, name, default)
        copied, plain = (runs[1:] for runs in seconds.values())
        speeds = [
            f"{n_tokens / min(runs):,.0f} / {n_tokens / statistics.median(runs):,.0f}"
            for runs in (copied, plain)
        ]
        ratio = statistics.median(base / own for own, base in zip(copied, plain))
        print(f"| {batch_size} | {speeds[0]} | {speeds[1]} | {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
