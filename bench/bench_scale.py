"""Rows/s and tokens/s of one corpus through the `elmo` component four ways, in one run:
`nlp.pipe` in one process, `nlp.pipe(n_process=2)`, and Ray Data (`ElmoMapper`) with 1 and 2
workers of one CPU each; Ray's start-up (cluster, actors, model loading) is timed separately.

    python bench/bench_scale.py en_ewt-ud-train.conllu --sentences 2000   # UD English EWT

Every way runs the same saved pipeline (blank English + the bundled biLM) on the same texts.
The Ray rates exclude start-up: the time until the first batch of each worker comes back
(cluster already running; actors started, pipeline loaded, a batch embedded; taken as the first
`workers` batches) is printed on its own, and the rate counts the tokens of the batches after.
`nlp.pipe`'s time includes its processes' start. Rows/s are tokens/s over the corpus's mean tokens per row.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import spacy
import torch
from machine import machine_line

from spacy_elmo.ray_data import ElmoMapper


def read_texts(conllu: Path, n_sentences: int) -> list[str]:
    with open(conllu, encoding="utf8") as lines:
        texts = [line[len("# text = ") :].strip() for line in lines if line.startswith("# text = ")]
    return texts[:n_sentences]


def save_pipeline(folder: Path) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()  # the bundled en_elmo_cpu biLM
    nlp.to_disk(folder / "pipeline")
    return folder / "pipeline"


def time_nlp_pipe(pipeline: Path, texts: list[str], n_process: int, batch_size: int) -> tuple[float, int]:
    nlp = spacy.load(pipeline)
    started = time.perf_counter()
    tokens = sum(len(doc) for doc in nlp.pipe(texts, n_process=n_process, batch_size=batch_size))
    return time.perf_counter() - started, tokens


def time_ray(
    ray, pipeline: Path, texts: list[str], workers: int, batch_size: int
) -> tuple[float, float, int, int]:
    """(seconds after the first `workers` batches came back, seconds until they did, tokens,
    tokens after them): the steady work, and Ray's start-up (actors, model loading) plus about
    one batch per worker."""
    rows = [{"id": index, "text": text} for index, text in enumerate(texts)]
    started = time.perf_counter()
    dataset = ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // batch_size)).map_batches(
        ElmoMapper,
        fn_constructor_kwargs={"pipeline": str(pipeline), "layers": "mix"},
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=1,
        compute=ray.data.ActorPoolStrategy(size=workers),
    )
    first_batch_at, tokens_after_first, tokens = None, 0, 0
    for index, batch in enumerate(dataset.iter_batches(batch_size=None, batch_format="pyarrow")):
        batch_tokens = sum(len(row_tokens) for row_tokens in batch.column("tokens").to_pylist())
        tokens += batch_tokens
        if first_batch_at is not None:
            tokens_after_first += batch_tokens
        elif index + 1 == workers:  # about one batch from each worker: all have started
            first_batch_at = time.perf_counter()
    finished = time.perf_counter()
    return finished - first_batch_at, first_batch_at - started, tokens, tokens_after_first


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("conllu", type=Path)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    texts = read_texts(args.conllu, args.sentences)
    print(machine_line(torch.get_num_threads()))
    print(f"{len(texts)} sentences of {args.conllu.name}, batch size {args.batch_size}")
    # name -> (seconds of steady work, start-up seconds, tokens in the steady seconds)
    results: dict[str, tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        pipeline = save_pipeline(Path(folder))
        for n_process in (1, 2):
            seconds, tokens = time_nlp_pipe(pipeline, texts, n_process, args.batch_size)
            results[f"nlp.pipe(n_process={n_process})"] = (seconds, 0.0, tokens)
            total_tokens = tokens
        import ray

        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        print(f"ray.init (a local 2-CPU cluster): {time.perf_counter() - started:.1f} s")
        for workers in (1, 2):
            seconds, startup, tokens, steady_tokens = time_ray(ray, pipeline, texts, workers, args.batch_size)
            assert tokens == total_tokens, (tokens, total_tokens)  # the same tokens as nlp.pipe
            results[f"Ray, {workers} worker{'s' if workers > 1 else ''}"] = (seconds, startup, steady_tokens)
        ray.shutdown()
    print("\n| run | start-up s | steady s | tokens/s | rows/s |\n|---|---|---|---|---|")
    rates = {}
    for name, (seconds, startup, tokens) in results.items():
        rates[name] = tokens / seconds
        rows_per_s = rates[name] * len(texts) / total_tokens
        print(f"| {name} | {startup:.1f} | {seconds:.1f} | {rates[name]:.0f} | {rows_per_s:.1f} |")
    two, one, pipe2 = rates["Ray, 2 workers"], rates["Ray, 1 worker"], rates["nlp.pipe(n_process=2)"]
    print(f"\nRay 2 workers / Ray 1 worker: {two / one:.2f}x (target >= 1.6x)")
    print(f"Ray 2 workers / nlp.pipe(n_process=2): {two / pipe2:.2f}x (target >= 0.9x)")


if __name__ == "__main__":
    main()
