"""Turn plain text files (one paragraph per line) into the JSONL that `spacy pretrain` reads.

spaCy's `JsonlCorpus` skips, without a word, every record of `max_length` tokens or more (500 in
the config that `spacy init fill-config --pretraining` writes), and most of the registry text
comes in paragraphs longer than that: 3.5 M of its 4.75 M words. So each paragraph is cut into
chunks of whole sentences (spaCy's rule-based `sentencizer`) of fewer than `--max-tokens` tokens;
a sentence that is longer on its own is cut between tokens. Every token is kept, in order.

python scripts/raw_text_jsonl.py assets/pretraining/train.txt assets/ewt-train.txt corpus/raw_text.jsonl
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from pathlib import Path

import spacy
import srsly
from spacy.tokens import Doc, Span

# Below the 500-token `max_length` of the filled pretraining config, with room to spare.
DEFAULT_MAX_TOKENS = 400


def sentence_pieces(sentence: Span, max_tokens: int) -> Iterator[Span]:
    """The sentence itself, or consecutive slices of it of `max_tokens` tokens when longer."""
    for start in range(sentence.start, sentence.end, max_tokens):
        yield sentence.doc[start : min(start + max_tokens, sentence.end)]


def chunk_paragraph(doc: Doc, max_tokens: int) -> Iterator[str]:
    """Texts of consecutive runs of whole sentences of doc, each shorter than `max_tokens`
    tokens. Together they hold every token of doc, in order."""
    chunk_start = chunk_end = 0
    for sentence in doc.sents:
        for piece in sentence_pieces(sentence, max_tokens - 1):
            if piece.end - chunk_start >= max_tokens:
                yield doc[chunk_start:chunk_end].text
                chunk_start = piece.start
            chunk_end = piece.end
    if chunk_end > chunk_start:
        yield doc[chunk_start:chunk_end].text


def chunked_records(paragraphs: Iterable[str], max_tokens: int) -> Iterator[dict[str, str]]:
    """`{"text": ...}` records of fewer than `max_tokens` spaCy tokens each, from paragraphs."""
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.max_length = 10**8  # one registry paragraph has 33,558 words
    for doc in nlp.pipe(paragraphs, batch_size=64):
        yield from ({"text": text} for text in chunk_paragraph(doc, max_tokens))


def read_paragraphs(paths: Iterable[Path]) -> Iterator[str]:
    for path in paths:
        with path.open(encoding="utf8") as lines:
            yield from (line.strip() for line in lines if line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("texts", nargs="+", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help="records stay below this many tokens: keep it at or under the pretraining corpus's max_length",
    )
    args = parser.parse_args()
    records = list(chunked_records(read_paragraphs(args.texts), args.max_tokens))
    srsly.write_jsonl(args.output, records)
    words = sum(len(record["text"].split()) for record in records)
    print(f"Wrote {args.output}: {len(records):,} records, {words:,} whitespace-separated words")


if __name__ == "__main__":
    main()
