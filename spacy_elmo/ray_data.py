"""`ElmoMapper`, the Ray engine's public face: a callable class for `Dataset.map_batches` that
embeds (a biLM) or annotates (a pipeline) rows of text or tokens. It lives with the Ray engine
(`spacy_elmo.corpus.ray.mapper`); this is the import path users write."""

from .corpus.ray.mapper import ElmoMapper

__all__ = ["ElmoMapper"]
