"""Corpus input and output shared by every engine: where an input's files are (`sources`), how
they are read into checked rows (`reading`), the rules for writing an output (`outputs`), and the
one line a run prints (`summary`)."""

from .sources import Corpus, CorpusFile, find_corpus

__all__ = ["Corpus", "CorpusFile", "find_corpus"]
