"""Corpora through the `elmo` component: rows of text or tokens in, rows of tokens, vectors and
annotations out. The same code runs in one process (`--engine local`) and inside the Ray Data
mapper (`spacy_elmo.ray_data.ElmoMapper`), so both engines give the same numbers."""

from .annotator import Annotator
from .rows import LAYER_CHOICES, BadRowError

__all__ = ["LAYER_CHOICES", "Annotator", "BadRowError"]
