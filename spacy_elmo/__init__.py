"""spacy-elmo: ELMo (Peters et al. 2018) as a spaCy v3 plugin, with a pure-PyTorch biLM."""

__version__ = "0.1.0"
