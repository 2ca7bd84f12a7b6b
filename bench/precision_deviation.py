"""How far each reduced precision moves a biLM's outputs from the exact ones, on real text.

    python bench/precision_deviation.py                         # bundled en_elmo_cpu, 2,001 EWT dev sentences
    python bench/precision_deviation.py --model original --sentences 200

Prints, per precision, the largest absolute difference over every layer and token, per layer,
and the lowest cosine of a token vector, with the largest exact value for scale.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bilm import EWT_DEV, read_conllu_sentences  # noqa: E402
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.bilm import PRESETS, BiLM  # noqa: E402
from spacy_elmo.bundled import BUNDLED_NAME, load_bundled_bilm  # noqa: E402


def load(model: str) -> BiLM:
    """The bundled biLM, or random weights in a preset's shape (the same seed every time)."""
    if model == BUNDLED_NAME:
        return load_bundled_bilm()
    torch.manual_seed(0)
    return BiLM(PRESETS[model])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=BUNDLED_NAME, help=f"{BUNDLED_NAME} or a preset name")
    parser.add_argument("--sentences", type=int, default=2001)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precisions", nargs="+", default=["bf16", "int8"])
    args = parser.parse_args()
    fix_threads(args.threads)
    sentences = read_conllu_sentences(EWT_DEV, args.sentences)
    print(f"{machine_line(args.threads)}; {args.model}; {len(sentences):,} EWT dev sentences")
    exact_model = load(args.model)
    exact = exact_model.embed_sentences(sentences)
    largest = max(float(np.abs(layers).max()) for layers in exact)
    for precision in args.precisions:
        reduced = load(args.model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bf16 without bf16 instructions warns, and runs
            reduced.set_precision(precision)
        per_layer = np.zeros(exact[0].shape[0])
        lowest_cosine = 1.0
        for got, want in zip(reduced.embed_sentences(sentences), exact):
            per_layer = np.maximum(per_layer, np.abs(got - want).max(axis=(1, 2)))
            cosine = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
            lowest_cosine = min(lowest_cosine, float(cosine.min()))
        layers = ", ".join(f"{value:.3f}" for value in per_layer)
        print(
            f"{precision}: largest abs difference {per_layer.max():.3f} (layers {layers}), "
            f"lowest cosine {lowest_cosine:.5f}; largest exact value {largest:.2f}"
        )


if __name__ == "__main__":
    main()
