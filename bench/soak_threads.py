"""One `nlp` called from many threads for a long time: no error, flat memory, the vectors of one thread.

    python bench/soak_threads.py --docs 200000 --threads 8
    python bench/soak_threads.py --docs 20000 --precision auto

The pipeline is `spacy.blank("en")` + `elmo` with the bundled biLM, as a service holds it. The
texts are the first `--texts` '# text' lines of a UD file. They are cut into jobs, each one
`nlp(text)` or one `nlp.pipe(texts)` of 2 to 48 texts, and the main thread first runs every job
once alone: the reference. Then `--threads` threads take jobs round-robin until `--docs` docs are
done, and every doc's layers are compared with the reference of its job (the same call on the
same texts, so the same batches). A thread that raises ends the run.

VmRSS is read after every `--every` docs; the warm-up is the first 10% of the docs. It prints
one line per reading, then the growth (the median of the last quarter of the readings after the
warm-up over that of the first quarter: 8 threads' batches in flight move single readings by
tens of MB either way), the readings' range after the warm-up, the largest difference from the
reference, and how many docs and errors there were.
The token-vector cache makes a doc's vectors depend on which batch first encoded its words, by
float32 rounding in fp32; in int8 by the inputs' quantisation steps, so "auto" (which may pick
int8) is compared with a looser bound.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import spacy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_memory import rss_mb  # noqa: E402
from workload import ud_texts  # noqa: E402

EWT_TRAIN = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud_en_ewt" / "en_ewt-ud-train.conllu"
BOUNDS = {"fp32": 1e-4, "bf16": 0.1, "int8": 0.75, "auto": 0.75}
"""Largest abs difference from the reference that passes, by precision (docs/speed.md's
deviations of each precision from exact fp32 bound it from above)."""


@dataclass(frozen=True)
class Job:
    """One call a service makes: `nlp(text)` for one text, else `nlp.pipe(texts)`."""

    texts: tuple[str, ...]

    def run(self, nlp: spacy.Language) -> list[np.ndarray]:
        """The (L + 1, n, 2P) layers of each doc."""
        docs = [nlp(self.texts[0])] if len(self.texts) == 1 else list(nlp.pipe(self.texts, batch_size=16))
        return [doc._.elmo.layers for doc in docs]


def make_jobs(texts: list[str], seed: int) -> list[Job]:
    """Every text in one job: half alone, the others in `nlp.pipe` calls of 2 to 48 texts."""
    rng = random.Random(seed)
    jobs, start = [], 0
    while start < len(texts):
        size = 1 if rng.random() < 0.5 else rng.randint(2, 48)
        jobs.append(Job(tuple(texts[start : start + size])))
        start += size
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conllu", type=Path, default=EWT_TRAIN)
    parser.add_argument("--docs", type=int, default=200_000, help="docs to process across all threads")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--texts", type=int, default=2000, help="distinct texts (the reference's size)")
    parser.add_argument("--every", type=int, default=10_000, help="read VmRSS after every this many docs")
    parser.add_argument("--precision", default="fp32", choices=sorted(BOUNDS))
    args = parser.parse_args()

    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"precision": args.precision})
    start = time.perf_counter()
    nlp("The biLM loads (and with precision auto, times its products) on the first call.")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, {args.threads} caller threads, "
        f"precision {args.precision}; first call {time.perf_counter() - start:.1f} s"
    )
    jobs = make_jobs(ud_texts(args.conllu)[: args.texts], seed=0)
    start = time.perf_counter()
    reference = {job: job.run(nlp) for job in jobs}
    print(
        f"reference: {len(jobs)} jobs of {args.texts} texts, one thread, "
        f"{args.texts / (time.perf_counter() - start):,.0f} docs/s"
    )

    lock = threading.Lock()
    state = {"docs": 0, "next_reading": args.every, "worst": 0.0, "errors": 0}
    readings: list[tuple[int, float]] = [(0, rss_mb())]
    job_cycle = itertools.cycle(jobs)
    start = time.perf_counter()

    def serve() -> None:
        while True:
            with lock:
                if state["docs"] >= args.docs or state["errors"]:
                    return
                job = next(job_cycle)
            try:
                got = job.run(nlp)
            except Exception as error:  # noqa: BLE001 - reported with the figures, ends the run
                with lock:
                    state["errors"] += 1
                print(f"error: {error!r}", flush=True)
                return
            worst = max(float(np.abs(a - b).max(initial=0.0)) for a, b in zip(got, reference[job]))
            with lock:
                state["worst"] = max(state["worst"], worst)
                state["docs"] += len(got)
                if state["docs"] >= state["next_reading"]:
                    state["next_reading"] += args.every
                    readings.append((state["docs"], rss_mb()))
                    elapsed = time.perf_counter() - start
                    print(
                        f"{state['docs']:>9,} docs  {readings[-1][1]:8.1f} MB RSS  "
                        f"{state['docs'] / elapsed:7,.0f} docs/s",
                        flush=True,
                    )

    threads = [threading.Thread(target=serve) for _ in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    readings.append((state["docs"], rss_mb()))
    after = [rss for docs, rss in readings if docs >= args.docs // 10]
    quarter = max(1, len(after) // 4)
    growth = statistics.median(after[-quarter:]) / statistics.median(after[:quarter]) - 1
    bound = BOUNDS[args.precision]
    print(
        f"{state['docs']:,} docs in {elapsed:,.0f} s ({state['docs'] / elapsed:,.0f} docs/s), "
        f"{state['errors']} errors; RSS after warm-up {min(after):.1f}-{max(after):.1f} MB, growth "
        f"{growth:+.1%} (last quarter over first); largest difference from one thread "
        f"{state['worst']:.3g} (bound {bound:g})"
    )
    ok = not state["errors"] and growth <= 0.05 and state["worst"] <= bound
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
