"""UD English EWT (CoNLL-U) + Universal NER EWT (IOB2) -> one `.spacy` corpus with parses and entities.

The two treebanks annotate the same sentences under the same `sent_id`s. A sentence gets the
UNER entities when both give the same words; otherwise (about 0.1% of sentences) its entity
annotation is left *missing*, so NER training ignores it while the parser still learns from it.
UNER's `B-OTH`/`I-OTH` and the stray `B-O`/`I-O` tags become `O`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

from ..bilm.io.atomic import atomic_path
from .errors import ElmoPipelineError

OUTSIDE_TAGS = {"B-OTH", "I-OTH", "B-O", "I-O"}


@dataclass
class ConlluSentence:
    """The syntactic words of one CoNLL-U sentence (multiword-token ranges resolved)."""

    sent_id: str
    words: list[str] = field(default_factory=list)
    spaces: list[bool] = field(default_factory=list)
    lemmas: list[str] = field(default_factory=list)
    pos: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    morphs: list[str] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)  # absolute word index; a root points to itself
    deps: list[str] = field(default_factory=list)


@dataclass
class ConversionReport:
    """Counts of a conversion; `mismatched` lists sentences kept without entity annotation."""

    n_sentences: int = 0
    n_with_entities: int = 0
    n_entities: int = 0
    mismatched: list[str] = field(default_factory=list)


def _space_after(misc: str) -> bool:
    return "SpaceAfter=No" not in misc.split("|")


def read_conllu(path: Path) -> Iterator[ConlluSentence]:
    """Sentences of a CoNLL-U file; empty nodes (`8.1`) are skipped, as spaCy does."""
    sentence: ConlluSentence | None = None
    range_end, range_space = 0, True
    with open(path, encoding="utf8") as lines:
        for line_number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if line.startswith("# sent_id = "):
                sentence = ConlluSentence(sent_id=line[len("# sent_id = ") :].strip())
                range_end, range_space = 0, True
            elif not line:
                if sentence is not None and sentence.words:
                    yield sentence
                sentence = None
            elif not line.startswith("#"):
                columns = line.split("\t")
                if len(columns) != 10 or sentence is None:
                    raise ElmoPipelineError(
                        f"{path}:{line_number}: not a CoNLL-U word line inside a sentence with a "
                        "'# sent_id = ...' comment."
                    )
                index, form, lemma, upos, xpos, feats, head, deprel, _, misc = columns
                if "-" in index:
                    range_end, range_space = int(index.split("-")[1]), _space_after(misc)
                    continue
                if "." in index:
                    continue
                position = int(index)
                inside_range = position <= range_end
                sentence.words.append(form)
                if inside_range:
                    sentence.spaces.append(range_space if position == range_end else False)
                else:
                    sentence.spaces.append(_space_after(misc))
                sentence.lemmas.append(lemma)
                sentence.pos.append(upos)
                sentence.tags.append(xpos)
                sentence.morphs.append("" if feats == "_" else feats)
                sentence.heads.append(position - 1 if head == "0" else int(head) - 1)
                sentence.deps.append("ROOT" if deprel == "root" else deprel)
    if sentence is not None and sentence.words:
        yield sentence


def read_iob2(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """sent_id -> (words, IOB2 tags) of a UNER file, with OTH / stray O tags mapped to `O`."""
    sentences: dict[str, tuple[list[str], list[str]]] = {}
    sent_id: str | None = None
    with open(path, encoding="utf8") as lines:
        for line_number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if line.startswith("# sent_id = "):
                sent_id = line[len("# sent_id = ") :].strip()
                sentences[sent_id] = ([], [])
            elif line and not line.startswith("#"):
                columns = line.split("\t")
                if len(columns) < 3 or sent_id is None:
                    raise ElmoPipelineError(f"{path}:{line_number}: not an IOB2 token line of a sentence.")
                tag = "O" if columns[2] in OUTSIDE_TAGS else columns[2]
                sentences[sent_id][0].append(columns[1])
                sentences[sent_id][1].append(tag)
    return sentences


def _repaired_iob(tags: list[str]) -> list[str]:
    """An `I-X` that follows neither `B-X` nor `I-X` starts an entity (after O-mapping)."""
    repaired = []
    for position, tag in enumerate(tags):
        previous = repaired[position - 1] if position else "O"
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        repaired.append(tag)
    return repaired


def ewt_docs(
    conllu_path: Path, iob2_path: Path, vocab: Vocab, *, limit: int | None = None, report: ConversionReport
) -> Iterator[Doc]:
    """One Doc per sentence: words, spaces, lemmas, POS, tags, morphs, heads, deps and entities."""
    entities = read_iob2(iob2_path)
    for sentence in read_conllu(conllu_path):
        if limit is not None and report.n_sentences >= limit:
            return
        uner = entities.get(sentence.sent_id)
        ents = None
        if uner is not None and uner[0] == sentence.words:
            ents = _repaired_iob(uner[1])
            report.n_with_entities += 1
            report.n_entities += sum(tag.startswith("B-") for tag in ents)
        else:
            report.mismatched.append(sentence.sent_id)
        report.n_sentences += 1
        yield Doc(
            vocab,
            words=sentence.words,
            spaces=sentence.spaces,
            lemmas=sentence.lemmas,
            pos=sentence.pos,
            tags=sentence.tags,
            morphs=sentence.morphs,
            heads=sentence.heads,
            deps=sentence.deps,
            ents=ents,
        )


def convert_ewt(
    conllu_path: Path, iob2_path: Path, output: Path, *, limit: int | None = None
) -> ConversionReport:
    """Write the merged corpus as a DocBin (`.spacy`) atomically; return counts."""
    for path in (conllu_path, iob2_path):
        if not Path(path).is_file():
            raise ElmoPipelineError(
                f"{path} does not exist (expected UD EWT .conllu and UNER EWT .iob2 files)."
            )
    if limit is not None and limit < 1:
        raise ElmoPipelineError(f"limit is {limit}: give a positive number of sentences, or no limit.")
    report = ConversionReport()
    doc_bin = DocBin()
    for doc in ewt_docs(Path(conllu_path), Path(iob2_path), Vocab(), limit=limit, report=report):
        doc_bin.add(doc)
    with atomic_path(Path(output)) as temporary:
        doc_bin.to_disk(temporary)
    return report
