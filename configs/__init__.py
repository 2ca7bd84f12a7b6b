"""The training configs that ship with the package: spaCy pipelines (NER, parser, both; with ELMo
or spaCy's CNN alone) and biLM pretraining. `spacy-elmo init-config` copies one out.

This folder sits at the top of the repository and installs as `spacy_elmo.configs` (setup.cfg's
`package_dir`), so a clone, an editable install and a wheel all read the same files."""

from __future__ import annotations

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent


def shipped_config(name: str) -> Path:
    """The path of a shipped config, e.g. `shipped_config("ner_elmo.cfg")`."""
    return CONFIG_DIR / name
