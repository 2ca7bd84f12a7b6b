"""Turn plain text files (one document per line) into the JSONL that `spacy pretrain` reads.

python scripts/raw_text_jsonl.py assets/pretraining/train.txt assets/ewt-train.txt corpus/raw_text.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

import srsly


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("texts", nargs="+", type=Path)
    parser.add_argument("output", type=Path)
    args = parser.parse_args()

    def records():
        for path in args.texts:
            with path.open(encoding="utf8") as lines:
                yield from ({"text": line.strip()} for line in lines if line.strip())

    srsly.write_jsonl(args.output, records())
    print(f"Wrote {args.output}")


if __name__ == "__main__":
    main()
