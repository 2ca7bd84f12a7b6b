"""Tokens/s of one corpus through the `elmo` component, measured with the engine users run:
`nlp.pipe` in one process and with `n_process=2`, then `spacy_elmo.corpus.run_corpus` (what
`spacy-elmo annotate --engine ray` runs) with 1 and 2 workers of one CPU each, on one local
2-CPU Ray cluster.

    python bench/bench_scale.py en_ewt-ud-train.conllu --sentences 4000   # UD English EWT

Every way runs the same saved pipeline (blank English + the bundled biLM) over the same
sentences, one per line of a text file. A run_corpus run is split by the times its output parts
were written: start-up until the first `workers` parts (the run's start, the model shipped,
the workers started and loaded, a block each), then the steady phase, whose rate counts the
tokens of the parts written in it (read from the parts' footers), then the end (completeness
check, publishing). The CPU time of the whole machine and the load average are printed beside
each figure: on 2 vCPUs, Ray's own processes and the driver share the cores with the workers.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import spacy
import torch
from machine import machine_line
from workload import ud_texts

from spacy_elmo.corpus import run_corpus
from spacy_elmo.corpus.ray.layout import PART_KEY


def save_pipeline(folder: Path) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()  # the bundled en_elmo_cpu biLM
    nlp.to_disk(folder / "pipeline")
    return folder / "pipeline"


def cpu_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy so far, every process's: user, nice, system, irq
    and softirq of /proc/stat (its guest time is counted in user already)."""
    user, nice, system, _, _, irq, softirq = (
        int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:8]
    )
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def time_nlp_pipe(
    pipeline: Path, texts: list[str], n_process: int, batch_size: int
) -> tuple[float, int, float]:
    """(seconds, tokens, the machine's cores busy meanwhile) of `nlp.pipe`, its processes'
    start included."""
    nlp = spacy.load(pipeline)
    started, busy = time.perf_counter(), cpu_busy_seconds()
    tokens = sum(len(doc) for doc in nlp.pipe(texts, n_process=n_process, batch_size=batch_size))
    seconds = time.perf_counter() - started
    return seconds, tokens, (cpu_busy_seconds() - busy) / seconds


def parts_by_time(output: Path) -> list[tuple[float, int]]:
    """(when written, tokens) of every part of a run's output, in order of writing."""
    import pyarrow.parquet

    found = []
    for part in output.glob("part-*.parquet"):
        tokens = json.loads(pyarrow.parquet.read_metadata(part).metadata[PART_KEY])["tokens"]
        found.append((part.stat().st_mtime, tokens))
    return sorted(found)


def time_run_corpus(
    pipeline: Path, corpus: Path, output: Path, workers: int, batch_size: int
) -> dict[str, float]:
    started, busy = time.time(), cpu_busy_seconds()
    summary = run_corpus(
        corpus,
        output,
        pipeline=pipeline,
        layers="mix",
        workers=workers,
        batch_size=batch_size,
        rows_per_file=batch_size,  # a file per batch: their times split start-up from the steady phase
        engine="ray",
    )
    ended = time.time()
    parts = parts_by_time(output)
    steady_from, steady_to = parts[workers - 1][0], parts[-1][0]
    steady_tokens = sum(tokens for _, tokens in parts[workers:])
    return {
        "start-up": steady_from - started,
        "steady": steady_to - steady_from,
        "end": ended - steady_to,
        "tokens": summary.tokens,
        "rate": steady_tokens / (steady_to - steady_from),
        "cpu busy": (cpu_busy_seconds() - busy) / (ended - started),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("conllu", type=Path)
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    texts = ud_texts(args.conllu, args.sentences)
    print(machine_line(torch.get_num_threads()))
    print(f"{len(texts)} sentences of {args.conllu.name}, batch size {args.batch_size}")
    print(
        "\n| run | start-up s | steady s | end s | tokens/s | machine's cores busy (of 2) | load average |"
        "\n|---|---|---|---|---|---|---|"
    )
    with tempfile.TemporaryDirectory() as folder:
        pipeline = save_pipeline(Path(folder))
        corpus = Path(folder) / "corpus.txt"
        corpus.write_text("".join(text + "\n" for text in texts), encoding="utf8")
        for n_process in (1, 2):
            seconds, total_tokens, cores = time_nlp_pipe(pipeline, texts, n_process, args.batch_size)
            rate = total_tokens / seconds
            print(
                f"| `nlp.pipe(n_process={n_process})` | 0.0 | {seconds:.1f} | 0.0 | {rate:,.0f} | "
                f"{cores:.2f} | {os.getloadavg()[0]:.1f} |"
            )
        import ray

        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        print(f"| `ray.init` (a local 2-CPU cluster) | {time.perf_counter() - started:.1f} | | | | | |")
        rates = {}
        for workers in (1, 2):
            figures = time_run_corpus(
                pipeline, corpus, Path(folder) / f"out-{workers}", workers, args.batch_size
            )
            assert figures["tokens"] == total_tokens, (figures["tokens"], total_tokens)  # nlp.pipe's tokens
            rates[workers] = figures["rate"]
            print(
                f"| run_corpus, {workers} worker{'s' if workers > 1 else ''} | {figures['start-up']:.1f} | "
                f"{figures['steady']:.1f} | {figures['end']:.1f} | {figures['rate']:,.0f} | "
                f"{figures['cpu busy']:.2f} | {figures['load']:.1f} |"
            )
        ray.shutdown()
    print(f"\nrun_corpus 2 workers / 1 worker, steady phase: {rates[2] / rates[1]:.2f}x (target >= 1.6x)")


if __name__ == "__main__":
    main()
