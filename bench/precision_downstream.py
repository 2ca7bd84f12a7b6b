"""Downstream effect of the reduced precisions: a trained ELMo pipeline scored with its biLM exact
and then at each reduced precision (`BiLM.set_precision`), on the same corpus, in one process.

    cd project && python ../bench/precision_downstream.py training/ner__elmo__1.0__seed0/model-best \
        corpus/test.spacy --precisions bf16 int8

Prints the CPU, then the pipeline's scores (NER F1, LAS, UAS, whichever it has), their change from
exact, and words/s for each precision.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import spacy
from spacy.training import Corpus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import fix_threads, machine_line  # noqa: E402

from spacy_elmo.pipeline.layers import get_bilm  # noqa: E402

SCORES = ("ents_f", "dep_las", "dep_uas")


def evaluate(nlp: spacy.Language, corpus_path: Path) -> tuple[dict[str, float], float]:
    """The pipeline's scores (0-100) and words/s on a .spacy corpus."""
    examples = list(Corpus(corpus_path)(nlp))
    n_words = sum(len(example.reference) for example in examples)
    start = time.perf_counter()
    scores = nlp.evaluate(examples)
    speed = n_words / (time.perf_counter() - start)
    return {key: 100 * scores[key] for key in SCORES if scores.get(key) is not None}, speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", type=Path, help="a trained pipeline with an `elmo` component")
    parser.add_argument("corpus", type=Path, help="the .spacy evaluation corpus")
    parser.add_argument("--precisions", nargs="+", default=["bf16", "int8"])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fix_threads(args.threads)
    print(f"{machine_line(args.threads)}; {args.pipeline} on {args.corpus}\n")
    nlp = spacy.load(args.pipeline)
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    results = {"fp32": evaluate(nlp, args.corpus)}
    for precision in args.precisions:
        bilm.set_precision(precision)
        results[precision] = evaluate(nlp, args.corpus)
    exact = results["fp32"][0]
    print("| precision | " + " | ".join(f"{key} | change" for key in exact) + " | words/s |")
    print("|---" * (2 * len(exact) + 2) + "|")
    for precision, (scores, speed) in results.items():
        cells = " | ".join(f"{value:.2f} | {value - exact[key]:+.2f}" for key, value in scores.items())
        print(f"| {precision} | {cells} | {speed:,.0f} |")


if __name__ == "__main__":
    main()
