"""Merge UD English-EWT (parses, CoNLL-U) and UNER English-EWT (entities, IOB2) into one `.spacy` corpus.

One Doc per sentence, read by spaCy's own CoNLL-U converter: words, spacing (multiword tokens
such as "don't" become "do" + "n't" with no space between), lemmas, UPOS, XPOS, morphology,
heads and dependency labels. The two treebanks annotate the same sentences under the same
`sent_id`s; a sentence gets the UNER entities when both give the same words, otherwise (about
0.1% of sentences) its entity annotation is left *missing*, so NER training ignores it while the
parser still learns from it. UNER's `B-OTH`/`I-OTH` and the stray `B-O`/`I-O` tags become `O`.

    python scripts/convert_ewt.py assets/ud_en_ewt/en_ewt-ud-dev.conllu \
        assets/uner_en_ewt/en_ewt-ud-dev.iob2 corpus/dev.spacy [--limit N] [--force]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from spacy.tokens import Doc, DocBin
from spacy.training import biluo_tags_to_spans, iob_to_biluo
from spacy.training.converters import conllu_to_docs

from spacy_elmo.bilm.io.atomic import atomic_path

OUTSIDE_TAGS = {"B-OTH", "I-OTH", "B-O", "I-O"}
SENT_ID = "# sent_id = "


@dataclass
class ConversionReport:
    """Counts of a conversion; `mismatched` lists sentences kept without entity annotation."""

    n_sentences: int = 0
    n_with_entities: int = 0
    n_entities: int = 0
    mismatched: list[str] = field(default_factory=list)


def conllu_sentences(path: Path, limit: int | None = None) -> tuple[list[str], list[str]]:
    """(sent_ids, sentences) of the first `limit` sentences of a CoNLL-U file, each sentence its
    word lines joined by newlines, as spaCy's CoNLL-U reader takes them (it drops the comments,
    sent_id included, so the sent_ids are read here, in the same order). A sentence without words
    is skipped; a word line that is not 10 tab-separated columns of a sentence with a sent_id
    comment is an error naming file:line."""
    sent_ids: list[str] = []
    sentences: list[str] = []
    sent_id: str | None = None
    words: list[str] = []
    with open(path, encoding="utf8") as lines:
        for line_number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if line.startswith(SENT_ID):
                sent_id, words = line[len(SENT_ID) :].strip(), []
            elif not line:
                if sent_id is not None and words:
                    sent_ids.append(sent_id)
                    sentences.append("\n".join(words))
                    if len(sentences) == limit:
                        return sent_ids, sentences
                sent_id, words = None, []
            elif not line.startswith("#"):
                if len(line.split("\t")) != 10 or sent_id is None:
                    raise SystemExit(
                        f"{path}:{line_number}: not a CoNLL-U word line inside a sentence with a "
                        "'# sent_id = ...' comment."
                    )
                words.append(line)
    if sent_id is not None and words:
        sent_ids.append(sent_id)
        sentences.append("\n".join(words))
    return sent_ids, sentences


def read_iob2(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """sent_id -> (words, IOB2 tags) of a UNER file, with OTH / stray O tags mapped to `O`."""
    sentences: dict[str, tuple[list[str], list[str]]] = {}
    sent_id: str | None = None
    with open(path, encoding="utf8") as lines:
        for line_number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if line.startswith(SENT_ID):
                sent_id = line[len(SENT_ID) :].strip()
                sentences[sent_id] = ([], [])
            elif line and not line.startswith("#"):
                columns = line.split("\t")
                if len(columns) < 3 or sent_id is None:
                    raise SystemExit(f"{path}:{line_number}: not an IOB2 token line of a sentence.")
                sentences[sent_id][0].append(columns[1])
                sentences[sent_id][1].append("O" if columns[2] in OUTSIDE_TAGS else columns[2])
    return sentences


def set_entities(doc: Doc, uner: tuple[list[str], list[str]] | None) -> int | None:
    """Give `doc` the UNER entities when UNER has its sentence with the same words, and return
    their number; otherwise leave its entity annotation missing and return None. spaCy's
    `iob_to_biluo` starts an entity at an `I-X` that does not continue an `X` (after `O` or
    another type), as UNER's annotators meant it."""
    if uner is None or uner[0] != [token.text for token in doc]:
        doc.set_ents([], default="missing")  # not "O": NER training must ignore the sentence
        return None
    spans = biluo_tags_to_spans(doc, iob_to_biluo(uner[1]))
    doc.set_ents(spans, default="outside")
    return len(spans)


def ewt_docs(
    conllu_path: Path, iob2_path: Path, report: ConversionReport, limit: int | None = None
) -> Iterator[Doc]:
    """One Doc per CoNLL-U sentence, with its parse and, where they match, its UNER entities."""
    entities = read_iob2(iob2_path)
    sent_ids, sentences = conllu_sentences(conllu_path, limit)
    if not sentences:  # spaCy's reader fails on an empty input
        return
    # One sentence per Doc; subtokens stay words. EWT's MISC column has no NER tags, and
    # set_entities overwrites the entity annotation of every Doc anyway.
    docs = conllu_to_docs("\n\n".join(sentences), n_sents=1, merge_subtokens=False, no_print=True)
    for sent_id, doc in zip(sent_ids, docs, strict=True):
        n_entities = set_entities(doc, entities.get(sent_id))
        if n_entities is None:
            report.mismatched.append(sent_id)
        else:
            report.n_with_entities += 1
            report.n_entities += n_entities
        report.n_sentences += 1
        yield doc


def convert(
    conllu_path: Path, iob2_path: Path, output: Path, *, limit: int | None = None, force: bool = False
) -> ConversionReport:
    """Write the merged corpus as a DocBin (`.spacy`) atomically; return counts. An existing
    output is overwritten only with `force`."""
    if output.exists() and not force:
        raise SystemExit(f"{output} exists already: pass --force to overwrite it, or give another path.")
    for path in (conllu_path, iob2_path):
        if not path.is_file():
            raise SystemExit(f"{path} does not exist (expected UD EWT .conllu and UNER EWT .iob2 files).")
    if limit is not None and limit < 1:
        raise SystemExit(f"limit is {limit}: give a positive number of sentences, or no limit.")
    report = ConversionReport()
    doc_bin = DocBin(docs=ewt_docs(conllu_path, iob2_path, report, limit))
    with atomic_path(output) as temporary:
        doc_bin.to_disk(temporary)
    return report


def main() -> None:
    """The command line: convert, then print a one-line summary."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("conllu", type=Path, help="UD English-EWT .conllu file")
    parser.add_argument("iob2", type=Path, help="UNER English-EWT .iob2 file of the same split")
    parser.add_argument("output", type=Path, help="the .spacy file to write")
    parser.add_argument("--limit", type=int, help="keep only the first N sentences (tests, CI)")
    parser.add_argument("--force", action="store_true", help="overwrite the output if it exists")
    args = parser.parse_args()
    report = convert(args.conllu, args.iob2, args.output, limit=args.limit, force=args.force)
    print(
        f"Wrote {args.output}: {report.n_sentences} sentences, {report.n_with_entities} with entities "
        f"({report.n_entities} entities), {len(report.mismatched)} without (token mismatch or absent)."
    )


if __name__ == "__main__":
    main()
