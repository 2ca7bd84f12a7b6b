"""`Annotator`: a loaded pipeline that turns a batch of corpus rows into output columns.

Embedding (`from_model`) runs a blank pipeline holding only the `elmo` component with the given
biLM; annotating (`from_pipeline`) runs every component of a trained pipeline. Either way the
vectors are the component's own (`doc._.elmo`), so they equal `nlp.pipe` in one process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from ..bilm.errors import ConfigError
from ..hub.loading import load_bilm
from ..pipeline.model_files import load_pipeline
from .rows import (
    LAYER_CHOICES,
    check_source,
    checked_text,
    checked_tokens,
    dependencies,
    entities,
    heads,
    row_count,
    row_words,
    select_vectors,
    words_column,
)


class Annotator:
    """Rows in, columns out; loads its pipeline once.

    nlp (Language): a pipeline with an `elmo` component (unless `layers` is "none").
    layers (str): what the `vectors` column holds, one of `LAYER_CHOICES`.
    split_on_whitespace (bool): read `text` as whitespace-separated tokens (embedding a biLM, as
        `spacy-elmo embed` reads its lines) rather than with the pipeline's tokenizer.
    docbin (bool): add a `docbin` column, each row's Doc as `DocBin` bytes (with `doc._.elmo`).
    """

    def __init__(self, nlp: Language, *, layers: str, split_on_whitespace: bool, docbin: bool) -> None:
        if layers not in LAYER_CHOICES:
            raise ConfigError(f"layers = {layers!r}: use one of {', '.join(LAYER_CHOICES)}.")
        self.nlp = nlp
        if layers != "none" and not any(self._is_elmo(name) for name in nlp.pipe_names):
            raise ConfigError(
                f"The pipeline has no elmo component (it has: {', '.join(nlp.pipe_names) or 'none'}), "
                'so it gives no ELMo vectors: pass layers "none" to annotate without vectors.'
            )
        self.layers = layers
        self.split_on_whitespace = split_on_whitespace
        self.docbin = docbin
        assigned = {attribute for name in nlp.pipe_names for attribute in nlp.get_pipe_meta(name).assigns}
        self.has_entities = "doc.ents" in assigned
        self.has_parse = "token.dep" in assigned

    @classmethod
    def from_model(
        cls,
        model: str | Path,
        *,
        weights: str | Path | None = None,
        layers: str = "average",
        precision: str = "fp32",
        docbin: bool = False,
    ) -> Annotator:
        """Embed with a biLM: anything `spacy-elmo embed` reads (a model directory, the bundled or a
        published name, an ELMoForManyLangs directory, an AllenNLP options file with `weights`)."""
        check_path_or_name("model", model, "a model directory or a biLM name")
        if weights is not None:
            check_path_or_name("weights", weights, "an AllenNLP weight file")
        bilm = load_bilm(model, None if weights is None else Path(weights))  # a str may be a name
        nlp = spacy.blank("xx")  # its tokenizer is never used: rows become Docs of their words
        elmo = nlp.add_pipe("elmo", config={"precision": precision})
        examples = [Example(Doc(nlp.vocab, words=["."]), Doc(nlp.vocab, words=["."]))]
        elmo.initialize(lambda: examples, nlp=nlp, loader=lambda: bilm)
        return cls(nlp, layers=layers, split_on_whitespace=True, docbin=docbin)

    @classmethod
    def from_pipeline(cls, pipeline: str | Path, *, layers: str = "mix", docbin: bool = False) -> Annotator:
        """Annotate with a trained pipeline (a directory or an installed package), all components on."""
        check_path_or_name("pipeline", pipeline, "a pipeline directory or an installed pipeline package")
        return cls(load_pipeline(pipeline), layers=layers, split_on_whitespace=False, docbin=docbin)

    def make_doc(self, row_id: Any, source: str, value: Any) -> Doc:
        """A row's Doc before the pipeline runs, from its `source` column ("text" or "tokens");
        empty or whitespace-only text has no tokens."""
        if source == "tokens":
            return Doc(self.nlp.vocab, words=checked_tokens(row_id, value))
        text = checked_text(row_id, value)
        if self.split_on_whitespace or not text.strip():
            return Doc(self.nlp.vocab, words=text.split())
        return self.nlp.make_doc(text)

    @property
    def vector_width(self) -> int:
        """D, the width of each vector (2P of the biLM)."""
        elmo = next(self.nlp.get_pipe(name) for name in self.nlp.pipe_names if self._is_elmo(name))
        return elmo.model.get_dim("nO")

    def _is_elmo(self, name: str) -> bool:
        return self.nlp.get_pipe_meta(name).factory == "elmo"

    def annotate(self, source: str, values: Sequence[Any], ids: Sequence[Any] | None) -> dict[str, list[Any]]:
        """The output columns of a batch of rows, one value per row, in order: `tokens`, `vectors`
        (float32 numpy arrays, see `rows.select_vectors`), `ents`, `heads` and `deps` where the
        pipeline sets them, and `docbin` on request.

        source (str): the column the values come from, "text" or "tokens" (`rows.words_column`).
        ids (Optional[Sequence]): the rows' ids, one per value, for errors that name a row.
        """
        check_source(source)
        ids = [None] * len(values) if ids is None else ids
        row_count({"id": ids, source: values})
        return self._annotate_docs(
            [self.make_doc(row_id, source, value) for row_id, value in zip(ids, values)]
        )

    def annotate_columns(self, columns: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
        """The output columns (as `annotate`) of a batch of input columns whose rows may mix the two
        forms: each row is read from its `tokens` where it has them (not None), else from its
        `text`; a row with neither is named by its own `id`."""
        words_column(columns)  # a batch with neither column at all
        n_rows = row_count(columns)
        ids, texts, tokens = (
            [None] * n_rows if name not in columns else columns[name] for name in ("id", "text", "tokens")
        )
        docs = [
            self.make_doc(row_id, *row_words(row_id, text, row_tokens))
            for row_id, text, row_tokens in zip(ids, texts, tokens)
        ]
        return self._annotate_docs(docs)

    def _annotate_docs(self, docs: list[Doc]) -> dict[str, list[Any]]:
        docs = list(self.nlp.pipe(docs, batch_size=max(1, len(docs))))
        output: dict[str, list[Any]] = {"tokens": [[token.text for token in doc] for doc in docs]}
        if self.layers != "none":
            output["vectors"] = [select_vectors(doc, self.layers) for doc in docs]
        if self.has_entities:
            output["ents"] = [entities(doc) for doc in docs]
        if self.has_parse:
            output["heads"] = [heads(doc) for doc in docs]
            output["deps"] = [dependencies(doc) for doc in docs]
        if self.docbin:
            output["docbin"] = [DocBin(docs=[doc], store_user_data=True).to_bytes() for doc in docs]
        return output


def check_path_or_name(setting: str, value: Any, what: str) -> None:
    if not isinstance(value, str | Path):
        raise ConfigError(
            f"{setting} = {value!r} ({type(value).__name__}): give {what}, as a str or a pathlib.Path."
        )
