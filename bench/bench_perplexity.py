"""Perplexity with the full softmax: logits at real positions only vs at every position.

Evaluation batches keep every row of the batch, so part of each (rows x steps) batch is padding;
the objective computes the (positions x V) logits only where a target is real. This times that
against the same objective scoring every position and masking afterwards, side by side in one
process, on the bundled biLM (V = 50,000) and UD EWT dev sentences, and checks the perplexities
agree.

    python bench/bench_perplexity.py                       # 50 and 1,000 sentences, 2 rounds
    python bench/bench_perplexity.py --sentences 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bilm import EWT_DEV, read_conllu_sentences  # noqa: E402
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.bundled import BUNDLED_PATH  # noqa: E402
from spacy_elmo.training import load_language_model, perplexity, sentence_perplexity  # noqa: E402
from spacy_elmo.training.objective import LanguageModelObjective  # noqa: E402


class EveryPositionObjective(LanguageModelObjective):
    """The baseline: full-softmax losses at every position; the padding is masked afterwards."""

    def _full_loss_where_real(
        self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        return self.head.full_loss(hidden, targets)


def timed(
    evaluate: Callable[[LanguageModelObjective], dict[str, float]], objective: LanguageModelObjective
) -> tuple[float, float]:
    """(seconds, perplexity) of one evaluation."""
    start = time.perf_counter()
    result = evaluate(objective)
    return time.perf_counter() - start, result["perplexity"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", nargs="+", type=int, default=[50, 1000])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128, help="rows of the stateful evaluation")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    fix_threads(args.threads)
    real_only, vocabulary = load_language_model(BUNDLED_PATH)
    every_position = EveryPositionObjective(real_only.bilm, real_only.head)
    print(f"{machine_line(args.threads)}; bundled biLM, V = {len(vocabulary):,}; EWT dev; median of rounds\n")
    print("| sentences | function | every position s | real positions only s | speed-up | perplexity |")
    print("|---|---|---|---|---|---|")
    for n_sentences in args.sentences:
        sentences = read_conllu_sentences(EWT_DEV, n_sentences)
        evaluations = {
            "perplexity": functools.partial(
                perplexity,
                sentences=sentences,
                vocabulary=vocabulary,
                batch_size=args.batch_size,
                unroll_steps=20,
            ),
            "sentence_perplexity": functools.partial(
                sentence_perplexity, sentences=sentences, vocabulary=vocabulary
            ),
        }
        for name, evaluate in evaluations.items():
            runs: dict[str, list[tuple[float, float]]] = {"every": [], "real": []}
            for _ in range(args.rounds):  # interleaved, so machine noise hits both alike
                runs["every"].append(timed(evaluate, every_position))
                runs["real"].append(timed(evaluate, real_only))
            seconds = {
                side: statistics.median(took for took, _ in side_runs) for side, side_runs in runs.items()
            }
            perplexities = {f"{ppl:.4f}" for side_runs in runs.values() for _, ppl in side_runs}
            agreement = perplexities.pop() if len(perplexities) == 1 else "DIFFER: " + ", ".join(perplexities)
            print(
                f"| {n_sentences:,} | `{name}` | {seconds['every']:.2f} | {seconds['real']:.2f} "
                f"| {seconds['every'] / seconds['real']:.2f}x | {agreement} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
