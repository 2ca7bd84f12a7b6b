"""UD English-PUD and UNER English-PUD -> two out-of-domain test sets (news and Wikipedia).

The two files annotate the same 1,000 sentences, but UNER's tokens follow an older UD release and
agree with UD's for only about half of them, so they stay separate sets: `pud-parse.spacy` holds
UD's trees (entity annotation missing), `pud-ner.spacy` UNER's tokens and entities (no parses).
UNER's `OTH` and stray `O` tags become `O`, as for EWT.

    python scripts/convert_pud.py assets/ud_en_pud/en_pud-ud-test.conllu \
        assets/uner_en_pud/en_pud-ud-test.iob2 corpus [--force]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from convert_ewt import conllu_sentences, read_iob2, set_entities
from spacy.tokens import Doc, DocBin
from spacy.training.converters import conllu_to_docs
from spacy.vocab import Vocab

from spacy_elmo.bilm.io.atomic import atomic_path

PARSE_FILE = "pud-parse.spacy"
NER_FILE = "pud-ner.spacy"


def parse_docs(conllu_path: Path) -> list[Doc]:
    """One Doc per UD sentence with its tree, its entity annotation left missing."""
    _, sentences = conllu_sentences(conllu_path)
    docs = list(conllu_to_docs("\n\n".join(sentences), n_sents=1, merge_subtokens=False, no_print=True))
    for doc in docs:
        set_entities(doc, None)
    return docs


def ner_docs(iob2_path: Path) -> list[Doc]:
    """One Doc per UNER sentence: its tokens (space-separated) and entities."""
    vocab = Vocab()
    docs = []
    for words, tags in read_iob2(iob2_path).values():
        doc = Doc(vocab, words=words)
        set_entities(doc, (words, tags))
        docs.append(doc)
    return docs


def convert(conllu_path: Path, iob2_path: Path, output_dir: Path, *, force: bool = False) -> dict[str, int]:
    """Write both sets into `output_dir` atomically; return the number of Docs in each file."""
    outputs = {PARSE_FILE: (conllu_path, parse_docs), NER_FILE: (iob2_path, ner_docs)}
    for name, (source, _) in outputs.items():
        if not source.is_file():
            raise SystemExit(f"{source} does not exist (expected UD English-PUD .conllu and UNER .iob2).")
        if (output_dir / name).exists() and not force:
            raise SystemExit(f"{output_dir / name} exists already: pass --force to overwrite it.")
    counts = {}
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, (source, read) in outputs.items():
        docs = read(source)
        with atomic_path(output_dir / name) as temporary:
            DocBin(docs=docs).to_disk(temporary)
        counts[name] = len(docs)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("conllu", type=Path, help="UD English-PUD .conllu file")
    parser.add_argument("iob2", type=Path, help="UNER English-PUD .iob2 file")
    parser.add_argument("output_dir", type=Path, help=f"where {PARSE_FILE} and {NER_FILE} go")
    parser.add_argument("--force", action="store_true", help="overwrite the outputs if they exist")
    args = parser.parse_args()
    counts = convert(args.conllu, args.iob2, args.output_dir, force=args.force)
    print(", ".join(f"Wrote {args.output_dir / name}: {count} sentences" for name, count in counts.items()))


if __name__ == "__main__":
    main()
