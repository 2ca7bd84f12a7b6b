"""Resident memory while a long stream of texts goes through `nlp.pipe` with the `elmo` component.

    python bench/bench_memory.py ../shared/data/ud_en_ewt/en_ewt-ud-train.conllu --tokens 100000

The pipeline is `spacy.blank("en")` + `elmo` with the bundled biLM. Docs are consumed and dropped
as a streaming user would (each keeps its own `doc._.elmo` while alive). VmRSS is read from
/proc after every `--every` tokens: a flat column means memory does not grow with the stream.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import spacy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import fix_threads  # noqa: E402
from workload import ud_texts  # noqa: E402


def rss_mb() -> float:
    """Current resident set size of this process (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conllu", type=Path, help="a UD .conllu file (its '# text' lines are the stream)")
    parser.add_argument("--tokens", type=int, default=100_000, help="stop after this many tokens")
    parser.add_argument("--every", type=int, default=10_000, help="report every this many tokens")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fix_threads(args.threads)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp("Warm up the bundled biLM.")
    print(f"after loading: {rss_mb():,.0f} MB RSS")
    print("| tokens | RSS MB | tokens/s |")
    print("|---|---|---|")
    n_tokens, next_report, start = 0, args.every, time.perf_counter()
    first_report = None
    for doc in nlp.pipe(itertools.cycle(ud_texts(args.conllu)), batch_size=args.batch_size):
        n_tokens += len(doc)
        if n_tokens >= next_report:
            rss = rss_mb()
            first_report = first_report or rss
            speed = n_tokens / (time.perf_counter() - start)
            print(f"| {n_tokens:,} | {rss:,.0f} | {speed:,.0f} |", flush=True)
            next_report += args.every
        if n_tokens >= args.tokens:
            break
    print(f"growth from the first report to the last: {rss_mb() - first_report:+,.0f} MB")


if __name__ == "__main__":
    main()
