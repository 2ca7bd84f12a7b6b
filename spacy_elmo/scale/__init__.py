"""Corpus jobs of any size on a Ray cluster: `run_corpus` reads the input with Ray's tasks,
embeds or annotates it on actors that write one output part per input block, resumes a run whose
process died, checks that every input row is in the output exactly once, and records how the
output was made in every file. Needs `pip install "spacy-elmo[ray]"`."""

from .engine import CorpusJob, run_corpus

__all__ = ["CorpusJob", "run_corpus"]
