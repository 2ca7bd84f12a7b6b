"""A converted ELMoForManyLangs model in spaCy pipelines of other languages: its lexicon turns the
tokens into ids, listeners train on it, and it survives saving the pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from spacy.language import Language
from spacy.training import Example

from spacy_elmo.bilm import BiLM
from spacy_elmo.pipeline.layers import get_bilm

from ..bilm.efml_models import write_random_efml
from .conftest import listener_config, loader_config, parser_model_config

GERMAN = [
    ("Die Bank hat die Zinsen erhöht.", {"entities": [(4, 8, "ORG")]}),
    ("Jürgen wohnt in München.", {"entities": [(0, 6, "PER"), (16, 23, "LOC")]}),
]


@pytest.fixture(scope="module")
def efml_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our model directory, converted from a random ELMoForManyLangs model with a word embedding."""
    source = write_random_efml(tmp_path_factory.mktemp("efml") / "source")
    target = tmp_path_factory.mktemp("efml") / "ours"
    BiLM.from_elmoformanylangs(source).save(target)
    return target


def elmo_nlp(language: str, model_dir: Path, *, ner: bool = False, frozen: bool = True) -> Language:
    nlp = spacy.blank(language)
    nlp.add_pipe("elmo", config={"frozen": frozen})
    if ner:
        nlp.add_pipe("ner", config=parser_model_config("ner", listener_config()))
    nlp.config["initialize"]["components"]["elmo"] = loader_config(model_dir)
    examples = [Example.from_dict(nlp.make_doc(text), annotations) for text, annotations in GERMAN]
    nlp.initialize(lambda: examples)
    return nlp


@pytest.mark.parametrize(
    "language, text", [("de", "Die Bank hat die Zinsen erhöht."), ("zh", "今天天气很好")]
)
def test_the_elmo_component_reads_tokens_through_the_lexicon(language, text, efml_model_dir):
    nlp = elmo_nlp(language, efml_model_dir)
    doc = nlp(text)
    expected = BiLM.load(efml_model_dir).embed_sentences([[token.text for token in doc]])[0]
    np.testing.assert_allclose(doc._.elmo.layers, expected, atol=1e-6)


def test_listeners_train_on_a_lexicon_model_and_the_pipeline_saves_and_loads(efml_model_dir, tmp_path):
    nlp = elmo_nlp("de", efml_model_dir, ner=True, frozen=False)
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    word_embedding = bilm.token_encoder.word_embedding.detach().clone()
    optimizer = nlp.create_optimizer()
    examples = [Example.from_dict(nlp.make_doc(text), annotations) for text, annotations in GERMAN]
    losses: dict[str, float] = {}
    for _ in range(3):
        nlp.update(examples, sgd=optimizer, losses=losses)
    assert losses["ner"] > 0 and np.isfinite(losses["ner"])
    trained = get_bilm(nlp.get_pipe("elmo").model)
    assert not torch.equal(
        trained.token_encoder.word_embedding.detach(), word_embedding
    )  # gradients reached it
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    text = "Jürgen mag ñandú-Eier und 天気."  # characters inside and outside the lexicon
    np.testing.assert_array_equal(loaded(text)._.elmo.layers, nlp(text)._.elmo.layers)
    assert get_bilm(loaded.get_pipe("elmo").model).lexicon == trained.lexicon
    assert [entity.label_ for entity in loaded(text).ents] == [entity.label_ for entity in nlp(text).ents]
