"""Words/s of N worker processes on one machine, each with its own `nlp`, against one process alone.

    python bench/bench_workers.py ../shared/data/ud_en_ewt/en_ewt-ud-dev.conllu --workers 2 4

The service pattern: a gunicorn/uvicorn master starts N workers, each holding the bundled ELMo
pipeline (`elmo + ner`, as in `pipeline_speed.py`), each calling `nlp.pipe` on its own requests.
Workers are either forked from a parent that loaded and ran the pipeline (gunicorn's `--preload`)
or spawned and load it themselves. All workers load and warm up, wait at a barrier, then run for
`--seconds`; the aggregate is their words over that time. Each setting runs with the thread
policy (nothing set) and with `SPACY_ELMO_THREADS=fixed` (torch's default count, as before the
policy), `--rounds` times, the settings taking turns; the table has the medians and each
aggregate against one process alone with the same policy, measured in the same rounds.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

POLICIES = ("adaptive", "fixed")


def load_pipeline(conllu: Path, n_sentences: int) -> tuple[Any, list[str]]:
    from pipeline_speed import elmo_pipeline, initialized
    from workload import ud_texts

    from spacy_elmo.bundled import BUNDLED_PATH

    texts = ud_texts(conllu, n_sentences)
    nlp = initialized(elmo_pipeline(BUNDLED_PATH), texts)
    for _ in nlp.pipe(texts[:64], batch_size=64):
        pass
    return nlp, texts


def serve(nlp: Any, texts: list[str], seconds: float, barrier: Any, words: Any) -> None:
    """Wait for every worker, then run `nlp.pipe` over the texts for `seconds`; add the words."""
    barrier.wait()
    n_words, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        n_words += sum(len(doc) for doc in nlp.pipe(texts, batch_size=64))
    with words.get_lock():
        words.value += n_words


def spawned_worker(
    policy: str, conllu: Path, n_sentences: int, seconds: float, barrier: Any, words: Any
) -> None:
    os.environ["SPACY_ELMO_THREADS"] = policy
    nlp, texts = load_pipeline(conllu, n_sentences)
    serve(nlp, texts, seconds, barrier, words)


def forked_workers(n_workers: int, policy: str, args: argparse.Namespace) -> float:
    """Aggregate words/s of `n_workers` children forked from this process after it loaded `nlp`."""
    os.environ["SPACY_ELMO_THREADS"] = policy
    nlp, texts = load_pipeline(args.conllu, args.n_sentences)
    context = multiprocessing.get_context("fork")
    barrier, words = context.Barrier(n_workers), context.Value("q", 0)
    workers = [
        context.Process(target=serve, args=(nlp, texts, args.seconds, barrier, words))
        for _ in range(n_workers)
    ]
    return run_workers(workers, words, args.seconds)


def spawned_workers(n_workers: int, policy: str, args: argparse.Namespace) -> float:
    """Aggregate words/s of `n_workers` spawned children, each loading its own `nlp`."""
    context = multiprocessing.get_context("spawn")
    barrier, words = context.Barrier(n_workers), context.Value("q", 0)
    worker_args = (policy, args.conllu, args.n_sentences, args.seconds, barrier, words)
    workers = [context.Process(target=spawned_worker, args=worker_args) for _ in range(n_workers)]
    return run_workers(workers, words, args.seconds)


def run_workers(workers: list[Any], words: Any, seconds: float) -> float:
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=600)
        if worker.exitcode != 0:
            raise SystemExit(f"a worker ended with exit code {worker.exitcode}")
    return words.value / seconds


def put_result(queue: Any, function: Any, *args: Any) -> None:
    queue.put(function(*args))


def in_fresh_process(function: Any, *args: Any) -> float:
    """`function(*args)` in a spawned process (so that the forking parent starts fresh too)."""
    context = multiprocessing.get_context("spawn")
    queue = context.SimpleQueue()
    parent = context.Process(target=put_result, args=(queue, function, *args))
    parent.start()
    parent.join(timeout=900)
    if parent.exitcode != 0:
        raise SystemExit(f"{function.__name__}{args[:2]} ended with exit code {parent.exitcode}")
    return queue.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("conllu", type=Path, help="a UD .conllu file (its '# text' lines are the input)")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n-sentences", type=int, default=300)
    args = parser.parse_args()
    from machine import cpu_name

    print(f"CPU: {cpu_name()}; {os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.2f}")
    settings = [(1, "spawn")] + [(n, start) for n in args.workers for start in ("fork", "spawn")]
    starters = {"fork": forked_workers, "spawn": spawned_workers}
    results: dict[tuple[int, str, str], list[float]] = {}
    loads: list[float] = []
    for _ in range(args.rounds):
        for n_workers, start in settings:
            for policy in POLICIES:
                speed = in_fresh_process(starters[start], n_workers, policy, args)
                results.setdefault((n_workers, start, policy), []).append(speed)
                loads.append(os.getloadavg()[0])
    print(
        f"{args.rounds} rounds of {args.seconds:g} s; load average (1 min) {min(loads):.2f}-{max(loads):.2f}"
    )
    print("| workers | start | policy | words/s (all workers) | against one process alone |")
    print("|---|---|---|---|---|")
    for (n_workers, start, policy), speeds in results.items():
        alone = statistics.median(results[(1, "spawn", policy)])
        median = statistics.median(speeds)
        print(f"| {n_workers} | {start} | {policy} | {median:,.0f} | {median / alone:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
