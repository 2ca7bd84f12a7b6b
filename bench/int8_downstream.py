"""Downstream effect of the opt-in int8 mode: a trained ELMo pipeline scored with its biLM exact
and with `BiLM.quantize_int8()`, on the same evaluation corpus, in the same process.

    cd project && python ../bench/int8_downstream.py training/ner__elmo_hash__1.0__seed0/model-best \
        corpus/test.spacy

Prints the pipeline's scores (NER F1, LAS, UAS, whichever it has) and words/s for both modes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import spacy
import torch
from spacy.training import Corpus

from spacy_elmo.pipeline.layers import get_bilm

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
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    nlp = spacy.load(args.pipeline)
    exact, exact_speed = evaluate(nlp, args.corpus)
    get_bilm(nlp.get_pipe("elmo").model).quantize_int8()
    int8, int8_speed = evaluate(nlp, args.corpus)
    print("| mode | " + " | ".join(exact) + " | words/s |")
    print("|---" * (len(exact) + 2) + "|")
    for name, scores, speed in (("exact", exact, exact_speed), ("int8", int8, int8_speed)):
        print(f"| {name} | " + " | ".join(f"{value:.2f}" for value in scores.values()) + f" | {speed:,.0f} |")


if __name__ == "__main__":
    main()
