"""Exact fp32 with and without the weight copies (`products.WeightCopies`: oneDNN's packed
copies, transposed LSTM projections), side by side in one process.

    python bench/bench_packed.py                          # original, batch 1, 8 and 64
    python bench/bench_packed.py --config small --batch-sizes 64

Random weights in a preset's shape, UD EWT dev sentences, every repetition with an empty type
cache; the two sides take turns repetition by repetition (the plain side runs with
`SPACY_ELMO_WEIGHT_COPIES=off`, so nothing is copied). Prints real tokens/s (max / median) and the
median of each repetition's copies / plain ratio. With `--rss`, also each side's peak resident
memory: a fresh process per side and batch size (spawned) that builds the model, embeds the
sentences once and reads its peak (VmHWM). With `--forked N`, the memory of N workers forked from a
parent that ran the model first (gunicorn's `--preload`): whether they share its copies.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bilm import EWT_DEV, read_conllu_sentences  # noqa: E402
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.bilm import PRESETS, BiLM, products  # noqa: E402


def use_copies(copies: bool) -> None:
    """Turn the weight copies on (the side with copies) or off (the plain side)."""
    os.environ[products.COPIES_ENV] = "on" if copies else "off"


def peak_rss_mb(config: str, batch_size: int, n_sentences: int, threads: int, copies: bool) -> float:
    """Peak resident MB of a process that builds the model and embeds the sentences once."""
    fix_threads(threads)
    use_copies(copies)
    torch.manual_seed(0)
    bilm = BiLM(PRESETS[config]).eval()
    bilm.embed_sentences(read_conllu_sentences(EWT_DEV, n_sentences), batch_size=batch_size)
    # VmHWM, not ru_maxrss: the latter survives exec, so a spawned child would report its parent's
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def memory_mb(fields: tuple[str, ...]) -> float:
    """The sum of `fields` (kB) of this process's /proc/self/smaps_rollup, in MB."""
    values = dict(line.split(":", 1) for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:])
    return sum(int(values[field].split()[0]) for field in fields) / 1024


def forked_worker(bilm: BiLM, sentences: list[list[str]], results: Any, done: Any) -> None:
    """A forked worker: embeds the sentences one by one and as one batch, reports its PSS and
    private MB and stays alive (its pages still mapped) until the parent has read every worker's."""
    for batch_size in (1, len(sentences)):
        bilm.embed_sentences(sentences, batch_size=batch_size)
    results.put((memory_mb(("Pss",)), memory_mb(("Private_Clean", "Private_Dirty"))))
    done.wait()


def forked_memory_mb(
    config: str, n_sentences: int, threads: int, copies: bool, n_workers: int
) -> tuple[float, list[float], float]:
    """In a fresh process: build the model, embed the sentences one by one and as a batch (the
    copies are made here), fork `n_workers` workers that embed them again. Returns the parent's
    private MB, each worker's private MB, and the PSS of all of them together (what they cost)."""
    fix_threads(threads)
    use_copies(copies)
    torch.manual_seed(0)
    bilm = BiLM(PRESETS[config]).eval()
    sentences = read_conllu_sentences(EWT_DEV, n_sentences)
    for batch_size in (1, len(sentences)):
        bilm.embed_sentences(sentences, batch_size=batch_size)
    parent_private = memory_mb(("Private_Clean", "Private_Dirty"))
    fork = multiprocessing.get_context("fork")
    results, done = fork.Queue(), fork.Event()
    workers = [
        fork.Process(target=forked_worker, args=(bilm, sentences, results, done)) for _ in range(n_workers)
    ]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=600) for _ in workers]
    total_pss = memory_mb(("Pss",)) + sum(pss for pss, _ in reports)
    done.set()
    for worker in workers:
        worker.join()
    return parent_private, [private for _, private in reports], total_pss


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
    parser.add_argument(
        "--forked",
        type=int,
        default=0,
        metavar="N",
        help="also the memory of N workers forked from a parent that ran the model (gunicorn --preload)",
    )
    args = parser.parse_args()
    fix_threads(args.threads)
    torch.manual_seed(0)
    bilm = BiLM(PRESETS[args.config]).eval()
    sentences = read_conllu_sentences(EWT_DEV, args.sentences)
    n_tokens = sum(len(sentence) for sentence in sentences)
    print(f"{machine_line(args.threads)}; {args.config}, exact fp32, {len(sentences)} sentences")
    rss_header = " peak RSS MB copies / plain |" if args.rss else ""
    print(f"\n| batch | copies tokens/s | plain tokens/s | copies / plain |{rss_header}")
    print("|---|---|---|---|" + ("---|" if args.rss else ""))
    for batch_size in args.batch_sizes:
        seconds: dict[str, list[float]] = {"copies": [], "plain": []}
        for _ in range(args.repeats + 1):  # the first round warms up (and makes the copies)
            for side, runs in seconds.items():
                use_copies(side == "copies")
                bilm.clear_token_cache()
                start = time.perf_counter()
                bilm.embed_sentences(sentences, batch_size=batch_size)
                runs.append(time.perf_counter() - start)
        use_copies(True)
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
    if args.forked:
        print(f"\n{args.forked} workers forked from a parent that ran the model, private MB and PSS of all")
        print("\n| side | parent private MB | each worker's private MB | PSS of all, MB |\n|---|---|---|---|")
        for copies in (True, False):
            parent, workers, total = spawned(
                forked_memory_mb, args.config, args.sentences, args.threads, copies, args.forked
            )
            each = " / ".join(f"{private:,.0f}" for private in workers)
            print(
                f"| {'copies' if copies else 'plain'} | {parent:,.0f} | {each} | {total:,.0f} |", flush=True
            )


def spawned(function: Callable[..., Any], *arguments: object) -> Any:
    """`function(*arguments)` in a fresh spawned process (its memory is its own; not a pool's
    daemonic worker, so that it may fork workers of its own)."""
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    process = spawn.Process(target=put_result, args=(results, function, *arguments))
    process.start()
    result = results.get()
    process.join()
    return result


def put_result(results: Any, function: Callable[..., Any], *arguments: object) -> None:
    results.put(function(*arguments))


if __name__ == "__main__":
    main()
