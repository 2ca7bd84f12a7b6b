"""Write the training subsets of the sample-efficiency comparison: `train-{fraction}.spacy`.

A fixed-seed random sample of the training docs (each EWT sentence is one doc), the same for every
system and seed, so that systems differ only in what they learn from the same sentences.

    python scripts/subsample.py corpus/train.spacy 0.1 0.3 1.0
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import spacy
from spacy.tokens import DocBin


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("train", type=Path)
    parser.add_argument("fractions", nargs="+", type=float)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    docs = list(DocBin().from_disk(args.train).get_docs(spacy.blank("en").vocab))
    order = list(range(len(docs)))
    random.Random(args.seed).shuffle(order)
    for fraction in args.fractions:
        if not 0 < fraction <= 1:
            raise SystemExit(f"fraction {fraction}: give a number in (0, 1].")
        keep = sorted(order[: max(1, round(fraction * len(docs)))])
        output = args.train.with_name(f"train-{fraction}.spacy")
        DocBin(docs=[docs[index] for index in keep], store_user_data=True).to_disk(output)
        print(f"Wrote {output}: {len(keep):,} of {len(docs):,} training docs")


if __name__ == "__main__":
    main()
