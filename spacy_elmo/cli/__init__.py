"""The `spacy-elmo` command line (typer, like spaCy's own CLI): `app` lives in `common.py`, and each
command registers itself on it when its module is imported here."""

from . import annotate, convert, download, embed, info, init_config, pretrain  # noqa: F401
from .common import app

__all__ = ["app"]
