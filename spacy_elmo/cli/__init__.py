"""The `spacy-elmo` command line (typer, like spaCy's own CLI)."""

from .main import app

__all__ = ["app"]
