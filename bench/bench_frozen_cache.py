"""Epoch time of `configs/ner_elmo.cfg` training with and without the frozen-layer cache.

A frozen biLM gives every training doc the same layers in every epoch; the `elmo` component's
`frozen_cache_mb` keeps them, so epochs after the first skip the biLM. Both pipelines are built
from the shipped config in the same process, with the same biLM, and trained on the same EWT
slice. `--preset bundled` keeps the config's default biLM (the bundled en_elmo_cpu: what
`spacy train configs/ner_elmo.cfg` trains with); a published shape (`small`, `original`) gets
random weights, as speed does not depend on their values. A third row trains
`configs/ner_cnn.cfg` (no biLM at all): the floor that a cached epoch can approach.

    python bench/bench_frozen_cache.py --preset bundled --n-sentences 500
    python bench/bench_frozen_cache.py --preset original --n-sentences 300 --require-speedup 10

With `--require-speedup X` it is a regression check: it exits with status 1 when the cached
pipeline's epoch 2 is not at least X times faster than its epoch 1 (an original-shape biLM
measured 17-25x on the development machines, docs/speed.md).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import spacy
from spacy.training import Corpus
from spacy.util import load_config, minibatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.bilm import BiLM, BiLMConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "project" / "scripts"))
from convert_ewt import convert  # noqa: E402  (the project's EWT converter, a script)


def epoch_seconds(config_name: str, config_overrides: dict, corpus: Path, n_epochs: int) -> list[float]:
    config = load_config(ROOT / "configs" / config_name, overrides=config_overrides, interpolate=False)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = list(Corpus(str(corpus))(nlp))
    nlp.initialize(lambda: examples)
    optimizer = nlp.create_optimizer()
    random.seed(0)
    seconds = []
    for _ in range(n_epochs):
        random.shuffle(examples)
        start = time.perf_counter()
        for batch in minibatch(examples, size=32):
            nlp.update(batch, sgd=optimizer)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--preset", default="bundled", help="'bundled', or a published shape: small, original"
    )
    parser.add_argument("--n-sentences", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--require-speedup", type=float, default=0.0, help="fail unless cached epoch 1 / epoch 2 >= this"
    )
    args = parser.parse_args()
    fix_threads(args.threads)
    with tempfile.TemporaryDirectory() as directory:
        bilm_dir, corpus = Path(directory) / "bilm", Path(directory) / "train.spacy"
        elmo_overrides = {}
        if args.preset != "bundled":
            BiLM(BiLMConfig.preset(args.preset)).save(bilm_dir)
            elmo_overrides = {"paths.elmo": str(bilm_dir)}
        convert(
            SHARED / "ud_en_ewt" / "en_ewt-ud-train.conllu",
            SHARED / "uner_en_ewt" / "en_ewt-ud-train.0c7ce0d.iob2",
            corpus,
            limit=args.n_sentences,
        )
        paths = {"paths.train": str(corpus), "paths.dev": str(corpus)}
        results = {
            f"`ner_elmo.cfg`, frozen_cache_mb {cache_mb}": epoch_seconds(
                "ner_elmo.cfg",
                {**paths, **elmo_overrides, "components.elmo.frozen_cache_mb": cache_mb},
                corpus,
                args.epochs,
            )
            for cache_mb in (512, 0)
        }
        results["`ner_cnn.cfg` (no biLM)"] = epoch_seconds("ner_cnn.cfg", paths, corpus, args.epochs)
    print(f"{machine_line(args.threads)}; {args.preset} biLM, {args.n_sentences} EWT training sentences")
    print("| pipeline | " + " | ".join(f"epoch {i + 1} s" for i in range(args.epochs)) + " | epoch 1 / 2 |")
    print("|---" * (args.epochs + 2) + "|")
    for name, seconds in results.items():
        cells = " | ".join(f"{s:.1f}" for s in seconds)
        print(f"| {name} | {cells} | {seconds[0] / seconds[1]:.1f}x |")
    cached = results["`ner_elmo.cfg`, frozen_cache_mb 512"]
    speedup = cached[0] / cached[1]
    if args.require_speedup and speedup < args.require_speedup:
        print(f"FAILED: the cached epoch 1 / epoch 2 is {speedup:.1f}x, below {args.require_speedup}x")
        sys.exit(1)


if __name__ == "__main__":
    main()
