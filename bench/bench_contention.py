"""Words/s of the bundled ELMo pipeline when other processes want the machine's cores, by thread policy.

    python bench/bench_contention.py ../shared/data/ud_en_ewt/en_ewt-ud-dev.conllu --busy 0 1 3

Each policy is one child process holding one pipeline, loaded and warmed up once:

- `cnn`: spaCy's CNN `tok2vec + ner`, for reference;
- `elmo default`: `elmo + ner` (the bundled biLM, an NER listener), nothing set by the user;
- `elmo 1 thread`: the same, `torch.set_num_threads(1)` before loading;
- `elmo all threads`: the same with `SPACY_ELMO_THREADS=fixed`: torch's default count (one
  thread per core), never changed; what the pipeline did before it had a thread policy.

For each `--busy` count the benchmark starts that many busy processes (`while True: pass`), then
runs `--rounds` rounds; in each round every child in turn runs `nlp.pipe` over the texts for
`--seconds` while the others wait on their pipes (asleep). The order of the children rotates
from round to round. It prints the median words/s of each policy, the thread count the child
ended with, the load average, and `default / best`: the default policy against the better of
the two fixed ones in the same row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workload import busy_processes, ud_texts  # noqa: E402

POLICIES = ("cnn", "elmo default", "elmo 1 thread", "elmo all threads")
FIXED = ("elmo 1 thread", "elmo all threads")


def child(policy: str, conllu: Path, n_sentences: int, batch_size: int) -> None:
    """Load the policy's pipeline, then answer `run SECONDS` lines on stdin with one JSON line."""
    import torch

    if policy == "elmo 1 thread":
        torch.set_num_threads(1)
    from pipeline_speed import cnn_pipeline, elmo_pipeline, initialized

    from spacy_elmo.bilm.threads import THREAD_POLICY
    from spacy_elmo.bundled import BUNDLED_PATH

    texts = ud_texts(conllu, n_sentences)
    nlp = initialized(cnn_pipeline() if policy == "cnn" else elmo_pipeline(BUNDLED_PATH), texts)
    for _ in nlp.pipe(texts[:batch_size], batch_size=batch_size):
        pass
    print("ready", flush=True)
    for line in sys.stdin:
        seconds = float(line.split()[1])
        n_words, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            n_words += sum(len(doc) for doc in nlp.pipe(texts, batch_size=batch_size))
        elapsed = time.perf_counter() - start
        chooser = THREAD_POLICY.chooser()
        at = dict(chooser.batches_at) if chooser else {}
        threads = chooser.count if chooser else torch.get_num_threads()  # the count its batches run at
        result = {"words_per_s": n_words / elapsed, "threads": threads, "batches_at": at}
        print(json.dumps(result), flush=True)


class Child:
    """A policy's process, spoken to through its stdin and stdout."""

    def __init__(self, policy: str, args: argparse.Namespace) -> None:
        command = [sys.executable, __file__, str(args.conllu), "--child", policy]
        command += ["--n-sentences", str(args.n_sentences), "--batch-size", str(args.batch_size)]
        self.policy = policy
        env = {**os.environ, "SPACY_ELMO_THREADS": "fixed"} if policy == "elmo all threads" else None
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def wait_ready(self) -> None:
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"{self.policy}: the child did not start (said {line!r})")

    def run(self, seconds: float) -> dict[str, float]:
        self.process.stdin.write(f"run {seconds}\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def measure(children: list[Child], busy: int, args: argparse.Namespace) -> dict[str, list[dict]]:
    """Every child's results over `args.rounds` rounds with `busy` busy processes beside them."""
    with busy_processes(busy):
        results: dict[str, list[dict]] = {child.policy: [] for child in children}
        for round_index in range(args.rounds):
            shift = round_index % len(children)
            for child in children[shift:] + children[:shift]:
                results[child.policy].append(child.run(args.seconds))
        return results


def report(busy: int, results: dict[str, list[dict]], load: float, seen: dict[str, int]) -> None:
    """One table row; `seen` holds the default child's batches by count before this row."""
    speeds = {policy: statistics.median(r["words_per_s"] for r in runs) for policy, runs in results.items()}
    threads = {policy: runs[-1]["threads"] for policy, runs in results.items()}
    best_fixed = max(speeds[policy] for policy in FIXED)
    cells = " | ".join(f"{speeds[policy]:,.0f} ({threads[policy]}t)" for policy in POLICIES)
    ratio = speeds["elmo default"] / best_fixed
    batches_at = results["elmo default"][-1]["batches_at"]
    in_row = {count: n - seen.get(count, 0) for count, n in sorted(batches_at.items())}
    seen.update(batches_at)
    spread = ", ".join(f"{n} at {count}t" for count, n in in_row.items() if n)
    print(f"| {busy} | {load:.2f} | {cells} | {ratio:.2f}x | {spread} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conllu", type=Path, help="a UD .conllu file (its '# text' lines are the input)")
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 3], help="busy processes beside it")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of one timed run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n-sentences", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--child", choices=POLICIES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.conllu, args.n_sentences, args.batch_size)
        return
    from machine import cpu_name

    print(f"CPU: {cpu_name()}; {os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")
    print(
        f"{args.n_sentences} sentences, batch {args.batch_size}, {args.rounds} rounds of {args.seconds:g} s"
    )
    children = [Child(policy, args) for policy in POLICIES]
    try:
        for child_process in children:
            child_process.wait_ready()
        header = " | ".join(f"{policy} words/s" for policy in POLICIES)
        print(f"| busy processes | load (1 min) | {header} | default / best fixed | default's batches |")
        print("|---" * (len(POLICIES) + 4) + "|")
        seen: dict[str, int] = {}
        for busy in args.busy:
            results = measure(children, busy, args)
            report(busy, results, os.getloadavg()[0], seen)
    finally:
        for child_process in children:
            child_process.close()


if __name__ == "__main__":
    main()
