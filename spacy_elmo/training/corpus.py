"""Raw text -> spaCy-tokenised sentences -> packed (batch x unroll) LM windows.

The corpus is streamed: files are read one document at a time (a line, or a whole file), so a
corpus larger than memory works. Every position of the stream can be saved as JSON and restored
exactly (`SentenceStream.get_state`, `WindowBatcher.get_state`), which `--resume` relies on.
"""

from __future__ import annotations

import gzip
import itertools
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN, token_to_ids
from ..bilm.io.atomic import atomic_write_text
from .errors import CorpusError

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
DOCUMENT_UNITS = ("line", "file")  # what one document of a corpus is


def corpus_files(paths: str | Sequence[str], what: str) -> list[Path]:
    """Every file under `paths` (files or folders, searched recursively), sorted; hidden files skipped.

    `paths` is a path, a comma-separated string of paths or a list. `what` names the corpus in errors.
    """
    if isinstance(paths, str):
        paths = [part for part in paths.split(",") if part.strip()]
    files: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            files.extend(
                sorted(
                    path
                    for path in entry.rglob("*")
                    if path.is_file()
                    and not any(part.startswith(".") for part in path.relative_to(entry).parts)
                )
            )
        elif entry.is_file():
            files.append(entry)
        else:
            raise CorpusError(f"The {what} corpus path {entry} does not exist: check [paths] in the config.")
    if not files:
        raise CorpusError(f"The {what} corpus {', '.join(map(str, paths))} holds no files.")
    return files


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


@dataclass
class DocumentReader:
    """Yields the documents of a list of files, one per line or one per file, in a fixed order.

    Undecodable bytes raise `CorpusError` naming the file and byte offset (of the decompressed
    text for `.gz`), unless `skip_undecodable`: then the document is skipped and counted. A UTF-8
    byte-order mark at the start of a file is dropped.
    """

    files: list[Path]
    document_per: str = "line"
    skip_undecodable: bool = False
    max_documents: int = 0  # 0 = all; else stop after this many (the held-out dev slice)
    n_skipped: int = 0

    def __post_init__(self) -> None:
        if self.document_per not in DOCUMENT_UNITS:
            raise CorpusError(
                f"document_per is {self.document_per!r}: use one of {', '.join(DOCUMENT_UNITS)} "
                "(a document is a line, or a whole file)."
            )

    def __iter__(self) -> Iterator[str]:
        documents = self._documents()
        return documents if not self.max_documents else itertools.islice(documents, self.max_documents)

    def _documents(self) -> Iterator[str]:
        for path in self.files:
            try:
                yield from self._file_documents(path)
            except (gzip.BadGzipFile, EOFError, zlib.error) as error:
                raise CorpusError(
                    f"{path} is not a readable gzip file ({error}): name a plain text file without "
                    "the .gz suffix, or compress it again."
                ) from None

    def _file_documents(self, path: Path) -> Iterator[str]:
        with _open_binary(path) as stream:
            if self.document_per == "file":
                text = self._decode(stream.read(), path, 0)
                if text is not None:
                    yield text
                return
            offset = 0
            for line in stream:
                text = self._decode(line, path, offset)
                offset += len(line)
                if text is not None:
                    yield text

    def _decode(self, raw: bytes, path: Path, offset: int) -> str | None:
        try:
            return raw.decode("utf-8-sig" if offset == 0 else "utf-8")
        except UnicodeDecodeError as error:
            if self.skip_undecodable:
                self.n_skipped += 1
                return None
            raise CorpusError(
                f"{path}: bytes at offset {offset + error.start} are not valid UTF-8 "
                f"({raw[error.start : error.start + 4]!r}). Convert the file to UTF-8, or set "
                "[corpus] skip_undecodable = true to skip such documents."
            ) from None


class SentenceSplitter:
    """spaCy's tokenizer (the tokens the `elmo` component sees) + its rule-based sentencizer."""

    def __init__(self, lang: str) -> None:
        import spacy

        try:
            self.nlp = spacy.blank(lang)
        except ImportError as error:
            if "[E048]" not in str(error):  # a known language whose tokenizer needs another package
                raise CorpusError(f"spaCy's {lang!r} tokenizer cannot load: {error}") from None
            raise CorpusError(
                f"spaCy has no language {lang!r} (the text's language: [corpus] lang, or evaluate's "
                "--lang): use a spaCy language code such as en, de or zh, or xx for mixed languages."
            ) from None
        self.nlp.add_pipe("sentencizer")
        self.nlp.max_length = 10**9

    def __call__(self, text: str) -> list[list[str]]:
        """Sentences of `text` as lists of token strings; whitespace tokens are dropped."""
        doc = self.nlp(text.strip())
        sentences = [[token.text for token in sentence if not token.is_space] for sentence in doc.sents]
        return [sentence for sentence in sentences if sentence]


class SentenceStream:
    """An endless stream of tokenised sentences over epochs of a corpus, for one rank.

    Documents are numbered in file order; this stream reads those with `index % world_size == rank`
    among the indices >= `first_document` (earlier ones are the held-out dev slice).
    """

    def __init__(
        self,
        reader: DocumentReader,
        splitter: SentenceSplitter,
        *,
        rank: int = 0,
        world_size: int = 1,
        first_document: int = 0,
    ) -> None:
        self.reader = reader
        self.splitter = splitter
        self.rank = rank
        self.world_size = world_size
        self.first_document = first_document
        self.epoch = 0
        self.next_document = 0  # index in the file order of the next document to read
        self.pending: list[list[str]] = []  # sentences of the current document not yet handed out
        self._documents: Iterator[tuple[int, str]] | None = None
        self._sentences_this_epoch = 0

    def _open(self) -> Iterator[tuple[int, str]]:
        for index, text in enumerate(self.reader):
            if index >= self.next_document and index >= self.first_document:
                if index % self.world_size == self.rank:
                    yield index, text

    def next_sentence(self) -> list[str]:
        while not self.pending:
            if self._documents is None:
                self._documents = self._open()
            document = next(self._documents, None)
            if document is None:
                if self._sentences_this_epoch == 0:
                    raise CorpusError(self._empty_message())
                self.epoch += 1
                self.next_document = 0
                self._sentences_this_epoch = 0
                self._documents = None
                continue
            index, text = document
            self.next_document = index + 1
            self.pending = self.splitter(text)
        self._sentences_this_epoch += 1
        return self.pending.pop(0)

    def _empty_message(self) -> str:
        files = ", ".join(str(path) for path in self.reader.files[:3])
        if self.world_size > 1 or self.first_document:
            return (
                f"Rank {self.rank} of {self.world_size} found no training sentences in {files}: the "
                f"corpus has too few documents after the {self.first_document} held out for dev. "
                "Use more text, fewer processes, or a smaller [corpus] dev_documents."
            )
        return f"The training corpus {files} has no tokens (it is empty or only whitespace)."

    def get_state(self) -> dict[str, Any]:
        """A JSON-ready copy of the position (later reads do not change it)."""
        return {
            "epoch": self.epoch,
            "next_document": self.next_document,
            "pending": [list(sentence) for sentence in self.pending],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.epoch = state["epoch"]
        self.next_document = state["next_document"]
        self.pending = [list(sentence) for sentence in state["pending"]]
        self._documents = None
        self._sentences_this_epoch = 1  # a resumed epoch has produced sentences already


class Vocabulary:
    """Softmax targets: `<S>`, `</S>`, `<UNK>`, then words by descending count (ties: alphabetical)."""

    def __init__(self, words: Sequence[str]) -> None:
        if tuple(words[:3]) != SPECIAL_TOKENS:
            raise CorpusError(f"A vocabulary must start with {', '.join(SPECIAL_TOKENS)}; got {words[:3]}.")
        self.words = list(words)
        self.index = {word: position for position, word in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def ids(self, tokens: Sequence[str]) -> list[int]:
        unknown = self.index[UNK_TOKEN]
        return [self.index.get(token, unknown) for token in tokens]

    @classmethod
    def from_counts(cls, counts: Counter[str], size: int, min_count: int) -> Vocabulary:
        """The `size` most frequent words seen at least `min_count` times (specials included in size)."""
        ranked = sorted(
            (item for item in counts.items() if item[1] >= min_count and item[0] not in SPECIAL_TOKENS),
            key=lambda item: (-item[1], item[0]),
        )
        return cls([*SPECIAL_TOKENS, *(word for word, _ in ranked[: max(size - 3, 0)])])

    def save(self, path: Path) -> None:
        atomic_write_text(path, "".join(f"{word}\n" for word in self.words))

    @classmethod
    def load(cls, path: Path) -> Vocabulary:
        if not path.is_file():
            raise CorpusError(f"Vocabulary file {path} is missing.")
        return cls(path.read_text(encoding="utf8").splitlines())


def count_tokens(reader: DocumentReader, splitter: SentenceSplitter, first_document: int) -> Counter[str]:
    """Token counts over every document from `first_document` on; raises if there are none."""
    counts: Counter[str] = Counter()
    n_characters = 0
    for index, text in enumerate(reader):
        if index < first_document:
            continue
        n_characters += len(text)
        for sentence in splitter(text):
            counts.update(sentence)
    if not counts:
        files = ", ".join(str(path) for path in reader.files[:3])
        what = "only whitespace" if n_characters else "empty"
        held_out = f" after the first {first_document} documents held out for dev" if first_document else ""
        raise CorpusError(
            f"The training corpus {files} is {what}{held_out}: there is nothing to train on. "
            "Point [paths] train at text files with one document per line (or per file)."
        )
    return counts


def read_sentences(documents: Iterable[str], splitter: SentenceSplitter, max_tokens: int) -> list[list[str]]:
    """Sentences of some documents up to about `max_tokens` tokens (0 = all), held in memory."""
    sentences: list[list[str]] = []
    n_tokens = 0
    for text in documents:
        for sentence in splitter(text):
            sentences.append(sentence)
            n_tokens += len(sentence) + 2
            if max_tokens and n_tokens >= max_tokens:
                return sentences
    return sentences


class ListSentences:
    """A finite list of sentences with the stream interface (`next_sentence`), for evaluation."""

    def __init__(self, sentences: list[list[str]]) -> None:
        self.sentences = sentences
        self.position = 0

    def next_sentence(self) -> list[str] | None:
        if self.position >= len(self.sentences):
            return None
        self.position += 1
        return self.sentences[self.position - 1]


@dataclass
class Windows:
    """One batch of windows. tokens: [direction][row] -> unroll + 1 token strings (inputs + next target)."""

    forward: list[list[str]]
    backward: list[list[str]]
    n_tokens: int  # real (non-padding) input positions per direction


class WindowBatcher:
    """Packs sentences, each wrapped in `<S>`…`</S>`, back to back into `batch_size` rows.

    Each row continues where its previous window stopped, so the LSTM states of a row carry over
    from batch to batch. The backward direction reads every sentence reversed (`</S>` wn … w1 `<S>`)
    at the same positions, so its states carry over too. A window has `unroll_steps` inputs and
    one more token, the last target, which is also the first input of the row's next window.
    """

    def __init__(self, sentences: SentenceStream | ListSentences, batch_size: int, unroll_steps: int) -> None:
        self.sentences = sentences
        self.unroll_steps = unroll_steps
        self.rows: list[list[list[str]]] = [[] for _ in range(batch_size)]  # wrapped sentences per row
        self.offsets = [0] * batch_size  # position of the next input inside the row's first sentence

    def next_batch(self) -> Windows | None:
        """The next windows; None when a finite source is used up (rows that ran dry are padded)."""
        width = self.unroll_steps + 1
        forward: list[list[str]] = []
        backward: list[list[str]] = []
        n_tokens = 0
        for row, offset in zip(self.rows, self.offsets):
            while sum(len(sentence) for sentence in row) - offset < width:
                sentence = self.sentences.next_sentence()
                if sentence is None:
                    break
                row.append([BOS_TOKEN, *sentence, EOS_TOKEN])
            forward.append([token for sentence in row for token in sentence][offset : offset + width])
            backward.append(
                [token for sentence in row for token in reversed(sentence)][offset : offset + width]
            )
            n_tokens += max(len(forward[-1]) - 1, 0)
        if n_tokens == 0:
            return None
        for index, row in enumerate(self.rows):
            self.offsets[index] += self.unroll_steps
            while row and self.offsets[index] >= len(row[0]):
                self.offsets[index] -= len(row.pop(0))
            if not row:
                self.offsets[index] = 0
        return Windows(forward, backward, n_tokens)

    def get_state(self) -> dict[str, Any]:
        """A JSON-ready copy of every row's unread sentences and offset."""
        return {
            "rows": [[list(sentence) for sentence in row] for row in self.rows],
            "offsets": list(self.offsets),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.rows = [[list(sentence) for sentence in row] for row in state["rows"]]
        self.offsets = list(state["offsets"])


class CharIdCache:
    """Token string -> char ids (C,), memoised; bounded so an open vocabulary cannot exhaust memory."""

    def __init__(self, max_characters_per_token: int, max_entries: int = 500_000) -> None:
        self.max_characters_per_token = max_characters_per_token
        self.max_entries = max_entries
        self.table: dict[str, np.ndarray] = {}

    def __call__(self, rows: list[list[str]], length: int) -> np.ndarray:
        """rows of token strings -> (len(rows), length, C) int64, zero-padded."""
        if len(self.table) > self.max_entries:
            self.table.clear()
        char_ids = np.zeros((len(rows), length, self.max_characters_per_token), dtype=np.int64)
        for row_index, row in enumerate(rows):
            for position, token in enumerate(row[:length]):
                ids = self.table.get(token)
                if ids is None:
                    ids = self.table[token] = token_to_ids(token, self.max_characters_per_token)
                char_ids[row_index, position] = ids
        return char_ids
