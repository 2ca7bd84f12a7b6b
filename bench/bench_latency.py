"""Batch-1 latency, the service pattern: one 20-token sentence per request, one request at a time.

Our `BiLM.embed_sentences([sentence])` against AllenNLP 2.10.1's `Elmo` on the same weights, in
the same process, taking turns request by request, idle and with busy processes beside it (each a
`python -c 'while True: pass'`). Every request is a different EWT dev sentence cut to its first
20 tokens, and our type cache is emptied before each one (AllenNLP has none), so both sides run
the character CNN on every token. With `--warm-cache N` ours keeps its cache, as a service does,
after embedding N other EWT dev sentences (shorter ones, none of those timed): a word seen
before skips the character CNN and highways; the share of timed tokens seen before is printed.
Each row prints p50 and p99 in ms and the p50 ratio, with the CPU, the load average (1 minute,
before and after the row), the torch thread count and the thread policy beside it.

    python bench/bench_latency.py                                # bundled and original, idle and 1 busy
    python bench/bench_latency.py --models bundled --requests 400 --busy 0 1 3
    python bench/bench_latency.py --models small --busy 0 --warm-cache 1000   # a warm service

`bundled` is the biLM inside the package (2x512_128, small char CNN); `original` is the
2x4096_512_2048cnn_2xhighway shape with random weights (speed does not depend on the values).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allennlp_elmo import import_allennlp_elmo  # noqa: E402
from bench_bilm import EWT_DEV, read_conllu_sentences  # noqa: E402
from machine import machine_line  # noqa: E402
from workload import busy_processes  # noqa: E402

from spacy_elmo.bilm import BiLM, BiLMConfig  # noqa: E402
from spacy_elmo.bundled import load_bundled_bilm  # noqa: E402

WARM_UP = 5
"""Requests per side before timing: first-call allocations, packed weight copies."""


def sentences_of(n_tokens: int, count: int) -> list[list[str]]:
    """`count` EWT dev sentences of at least `n_tokens` tokens, each cut to its first `n_tokens`."""
    long_enough = [s[:n_tokens] for s in read_conllu_sentences(EWT_DEV, 10**6) if len(s) >= n_tokens]
    if len(long_enough) < count:
        raise SystemExit(f"EWT dev has only {len(long_enough)} sentences of {n_tokens}+ tokens")
    return long_enough[:count]


def model_for(name: str) -> BiLM:
    """The biLM a row times: the bundled one, or a preset's shape with random weights."""
    if name == "bundled":
        return load_bundled_bilm()
    torch.manual_seed(0)
    return BiLM(BiLMConfig.preset(name))


def ours(bilm: BiLM, keep_cache: bool) -> Callable[[list[str]], None]:
    def request(sentence: list[str]) -> None:
        if not keep_cache:
            bilm.clear_token_cache()
        bilm.embed_sentences([sentence], batch_size=1)

    return request


def seen_before(warm: list[list[str]], timed: list[list[str]]) -> float:
    """The share of the timed tokens whose word was in a warm-up sentence or an earlier request."""
    seen = {word for sentence in warm for word in sentence}
    hits = total = 0
    for sentence in timed:
        hits += sum(word in seen for word in sentence)
        total += len(sentence)
        seen.update(sentence)
    return hits / total


def allennlp(elmo_module, options: Path, weights: Path) -> Callable[[list[str]], None]:
    """AllenNLP's `Elmo` (one output representation, no dropout, stateless), output to the host."""
    elmo = elmo_module.Elmo(str(options), str(weights), 1, dropout=0.0, requires_grad=False)
    elmo._elmo_lstm._elmo_lstm.stateful = False
    elmo.eval()

    def request(sentence: list[str]) -> None:
        with torch.no_grad():
            elmo(elmo_module.batch_to_ids([sentence]))["elmo_representations"][0].cpu()

    return request


def latencies(
    sides: dict[str, Callable[[list[str]], None]], sentences: list[list[str]]
) -> dict[str, list[float]]:
    """Seconds per request of each side, the sides taking turns request by request."""
    for sentence in sentences[:WARM_UP]:
        for request in sides.values():
            request(sentence)
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    for sentence in sentences:
        for name, request in sides.items():
            start = time.perf_counter()
            request(sentence)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `fraction` of them at or below."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(-(-fraction * len(ordered) // 1)) - 1))]


def cell(values: list[float]) -> str:
    return f"{percentile(values, 0.5) * 1e3:,.1f} / {percentile(values, 0.99) * 1e3:,.1f}"


def load_average() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=["bundled", "original"])
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200, help="timed requests per side and row")
    parser.add_argument(
        "--original-requests", type=int, default=100, help="timed requests per side for 'original'"
    )
    parser.add_argument("--busy", nargs="+", type=int, default=[0, 1], help="busy processes per row")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--warm-cache", type=int, default=0, help="keep our type cache, warmed with this many other sentences"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    elmo_module = import_allennlp_elmo()
    if elmo_module is None:
        print("AllenNLP is not importable: timing our BiLM alone (docs/speed.md says how to install it).")
    policy = os.environ.get("SPACY_ELMO_THREADS", "default")
    print(f"{machine_line(args.threads)}; thread policy (SPACY_ELMO_THREADS) {policy}")
    cache = f"type cache warmed with {args.warm_cache} other sentences" if args.warm_cache else "empty cache"
    print(f"One {args.tokens}-token EWT dev sentence per request, {cache}; p50 / p99 ms\n")
    print(
        "| model | busy processes | load avg before / after | torch threads after | requests "
        "| ours p50 / p99 | AllenNLP 2.10.1 p50 / p99 | AllenNLP p50 / ours p50 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models:
        n_requests = args.original_requests if name == "original" else args.requests
        sentences = sentences_of(args.tokens, n_requests + WARM_UP)
        with tempfile.TemporaryDirectory() as directory:
            options, weights = Path(directory) / "options.json", Path(directory) / "weights.hdf5"
            model_for(name).to_allennlp(options, weights)
            bilm = BiLM.from_allennlp(options, weights).eval()
            if args.warm_cache:
                warm = [s for s in read_conllu_sentences(EWT_DEV, 10**6) if len(s) < args.tokens]
                bilm.embed_sentences(warm[: args.warm_cache], batch_size=64)
                share = seen_before(warm[: args.warm_cache], sentences)
                print(f"{name}: {share:.0%} of the timed tokens were seen before")
            sides = {"ours": ours(bilm, keep_cache=args.warm_cache > 0)}
            if elmo_module is not None:
                sides["allennlp"] = allennlp(elmo_module, options, weights)
            for busy in args.busy:
                with busy_processes(busy):
                    before = load_average()
                    seconds = latencies(sides, sentences)
                    after = load_average()
                theirs, ratio = "-", "-"
                if "allennlp" in seconds:
                    theirs = cell(seconds["allennlp"])
                    ratio = f"{percentile(seconds['allennlp'], 0.5) / percentile(seconds['ours'], 0.5):.2f}x"
                print(
                    f"| {name} | {busy} | {before} / {after} | {torch.get_num_threads()} | {n_requests} "
                    f"| {cell(seconds['ours'])} | {theirs} | {ratio} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
