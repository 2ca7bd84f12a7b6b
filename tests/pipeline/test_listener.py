"""Listeners: frozen and fine-tuned training, per-listener mixes, replace_listeners, spaCy's contract."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from spacy.training import Example
from spacy.ty import ListenedToComponent
from spacy.util import fix_random_seed
from thinc.api import Adam

from spacy_elmo.pipeline import Elmo, ElmoListener, ElmoPipelineError
from spacy_elmo.pipeline.cache import doc_key
from spacy_elmo.pipeline.layers import get_bilm
from spacy_elmo.pipeline.mix import mix_weights, scalar_mix

from ..numerics import assert_within_tolerance
from .conftest import (
    TRAIN_DATA,
    listener_config,
    loader_config,
    make_ner_nlp,
    parser_model_config,
    train_examples,
)


def bilm_state(nlp: spacy.Language) -> dict[str, torch.Tensor]:
    return {
        name: tensor.clone() for name, tensor in get_bilm(nlp.get_pipe("elmo").model).state_dict().items()
    }


def ner_listener(nlp: spacy.Language, name: str = "ner") -> ElmoListener:
    (listener,) = nlp.get_pipe("elmo").listener_map[name]
    return listener


def layer_weights(listener: ElmoListener) -> np.ndarray:
    """A copy of the raw (pre-softmax) layer weights of a listener's scalar mix."""
    return scalar_mix(listener.mix).weights.detach().numpy().copy()


def train(nlp: spacy.Language, steps: int, learn_rate: float = 0.001) -> None:
    optimizer = Adam(learn_rate)
    examples = train_examples(nlp)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer, losses={})


def predicted_entities(nlp: spacy.Language, texts: list[str], **pipe_settings: object) -> list[list[tuple]]:
    return [[(e.start, e.end, e.label_) for e in doc.ents] for doc in nlp.pipe(texts, **pipe_settings)]


def trained_to_predict_entities(nlp: spacy.Language) -> spacy.Language:
    """Enough updates that the NER predicts entities (a frozen random biLM gives weak features),
    so that comparisons of predictions are not comparisons of empty lists."""
    train(nlp, 150, learn_rate=0.01)
    assert any(predicted_entities(nlp, [text for text, _ in TRAIN_DATA]))
    return nlp


def test_elmo_satisfies_spacys_listened_to_contract(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir)
    elmo = nlp.get_pipe("elmo")
    assert isinstance(elmo, ListenedToComponent) and isinstance(elmo, Elmo)
    assert elmo.listening_components == ["ner"] and len(elmo.listeners) == 1
    listener = elmo.listeners[0]
    assert elmo.remove_listener(listener, "ner") and elmo.listeners == []
    assert not elmo.remove_listener(listener, "ner")
    elmo.find_listeners(nlp.get_pipe("ner"))
    assert elmo.listeners == [listener]


def test_frozen_bilm_is_bit_identical_after_update_while_the_mix_learns(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir, frozen=True)
    before = bilm_state(nlp)
    weights_before = layer_weights(ner_listener(nlp))
    train(nlp, 3)
    for name, tensor in bilm_state(nlp).items():
        assert torch.equal(tensor, before[name]), name
    for name, parameter in get_bilm(nlp.get_pipe("elmo").model).named_parameters():
        assert parameter.grad is None, name
    assert not np.array_equal(layer_weights(ner_listener(nlp)), weights_before)


def test_fine_tuned_bilm_changes(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir, frozen=False)
    before = bilm_state(nlp)
    losses: dict[str, float] = {}
    optimizer = nlp.create_optimizer()
    for _ in range(2):  # the parser's output layer starts at zero: no gradient reaches elmo at step 1
        nlp.update(train_examples(nlp), sgd=optimizer, losses=losses)
    assert losses["elmo"] > 0
    changed = [name for name, tensor in bilm_state(nlp).items() if not torch.equal(tensor, before[name])]
    assert "token_encoder.char_embedding" in changed and len(changed) > len(before) // 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_listeners_learn_different_mix_weights(bilm_dir: Path, seed: int) -> None:
    fix_random_seed(seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.add_pipe("ner", config=parser_model_config("ner", listener_config(l2_lambda=0.001)))
    nlp.add_pipe(
        "tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": listener_config()}}
    )
    nlp.config["initialize"]["components"]["elmo"] = loader_config(bilm_dir)
    tags = {"Alice": "NNP", "Berlin": "NNP", "Bob": "NNP", "Paris": "NNP", "Acme": "NNP"}
    examples = []
    for text, gold in TRAIN_DATA:
        doc = nlp.make_doc(text)
        examples.append(Example.from_dict(doc, {**gold, "tags": [tags.get(t.text, "X") for t in doc]}))
    nlp.initialize(lambda: examples)
    elmo = nlp.get_pipe("elmo")
    assert elmo.listening_components == ["ner", "tagger"]
    optimizer = Adam(0.05)
    for _ in range(20):
        nlp.update(examples, sgd=optimizer)
    ner_weights, tagger_weights = (mix_weights(listener.mix) for listener in elmo.listeners)
    assert not np.allclose(ner_weights, 1 / 3, atol=1e-3) and not np.allclose(
        tagger_weights, 1 / 3, atol=1e-3
    )
    assert np.abs(ner_weights - tagger_weights).max() > 1e-3


HASH_EMBED = {
    "@architectures": "spacy.MultiHashEmbed.v2",
    "width": 8,
    "attrs": ["NORM", "SHAPE"],
    "rows": [500, 100],
    "include_static_vectors": False,
}


@pytest.mark.parametrize("embed", [None, HASH_EMBED], ids=["listener", "listener+hash-embed"])
def test_replace_listeners_then_removing_elmo_keeps_predictions(
    bilm_dir: Path, tmp_path: Path, embed: dict | None
) -> None:
    nlp = trained_to_predict_entities(
        make_ner_nlp(bilm_dir, tok2vec=listener_config(embed=embed) if embed else None)
    )
    texts = [text for text, _ in TRAIN_DATA] + ["Eve met Alice in Paris."]
    before = predicted_entities(nlp, texts)
    nlp.replace_listeners("elmo", "ner", ["model.tok2vec"])
    assert nlp.get_pipe("elmo").listeners == []
    replaced = nlp.get_pipe_config("ner")["model"]["tok2vec"]
    assert replaced["@architectures"] == "spacy-elmo.Tok2VecElmo.v1" and replaced["frozen"] is True
    nlp.remove_pipe("elmo")
    assert predicted_entities(nlp, texts) == before
    nlp.to_disk(tmp_path / "inline")
    loaded = spacy.load(tmp_path / "inline")
    assert predicted_entities(loaded, texts) == before


def test_predictions_survive_to_disk_and_load(bilm_dir: Path, tmp_path: Path) -> None:
    nlp = make_ner_nlp(bilm_dir)
    train(nlp, 3)
    doc = nlp("Alice moved to Paris.")
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("elmo").listening_components == ["ner"]
    saved, restored = bilm_state(nlp), bilm_state(loaded)
    assert saved.keys() == restored.keys()
    assert all(torch.equal(saved[name], restored[name]) for name in saved)
    # Same weights, but another memory layout: with several threads the kernels may sum in
    # another order, so the layers agree to float32 rounding, not bit for bit.
    loaded_doc = loaded("Alice moved to Paris.")
    np.testing.assert_allclose(loaded_doc._.elmo.layers, doc._.elmo.layers, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(  # the listener's mix, on the same layers, is restored exactly
        loaded.get_pipe("ner").model.get_ref("tok2vec").predict([doc]),
        nlp.get_pipe("ner").model.get_ref("tok2vec").predict([doc]),
    )


def test_core_tok2vec_and_elmo_do_not_claim_each_others_listeners(bilm_dir: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec")
    nlp.add_pipe("elmo", config={})
    nlp.add_pipe("ner", config=parser_model_config("ner", listener_config(upstream="*")))
    nlp.add_pipe(
        "tagger",
        config={
            "model": {
                "@architectures": "spacy.Tagger.v2",
                "tok2vec": {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "*"},
            }
        },
    )
    nlp._link_components()
    assert nlp.get_pipe("elmo").listening_components == ["ner"]
    assert nlp.get_pipe("tok2vec").listening_components == ["tagger"]


@pytest.mark.parametrize("annotates", [["elmo"], []])
def test_excluded_elmo_still_feeds_its_listeners(bilm_dir: Path, annotates: list[str]) -> None:
    """spaCy's frozen_components (+ optionally annotating_components) training path."""
    nlp = make_ner_nlp(bilm_dir)
    examples = train_examples(nlp)
    optimizer = nlp.create_optimizer()
    before = layer_weights(ner_listener(nlp))
    for _ in range(2):  # the parser's output layer starts at zero: the mix gets no gradient at step 1
        nlp.update(examples, sgd=optimizer, exclude=["elmo"], annotates=annotates)
    assert not np.array_equal(layer_weights(ner_listener(nlp)), before)


def test_rehearse_runs(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir, frozen=False)
    train(nlp, 1)
    before = bilm_state(nlp)
    nlp.resume_training()
    losses = nlp.rehearse(train_examples(nlp), sgd=nlp.create_optimizer())
    assert "ner" in losses
    assert all(torch.equal(tensor, before[name]) for name, tensor in bilm_state(nlp).items())


def test_listener_forgets_the_batch_after_using_it(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir, frozen=False)
    train(nlp, 1)
    listener = ner_listener(nlp)
    assert listener._outputs is None and listener._backprop is None and listener._batch_id is None


def test_listener_with_hash_embeddings_concatenates_and_trains(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir, tok2vec=listener_config(width=None, embed=HASH_EMBED))
    tok2vec = nlp.get_pipe("ner").model.get_ref("tok2vec")
    outputs = tok2vec.layers[0].predict([nlp("Alice in Paris")])
    assert outputs[0].shape == (3, 8 + 16)
    tables = [node for node in tok2vec.walk() if node.name.startswith("hashembed")]
    listener = ner_listener(nlp)
    before = [table.get_param("E").copy() for table in tables] + [layer_weights(listener)]
    train(nlp, 3)
    after = [table.get_param("E") for table in tables] + [layer_weights(listener)]
    assert len(tables) == 2 and all(not np.array_equal(old, new) for old, new in zip(before, after))


def test_frozen_layer_cache_computes_each_training_doc_once(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir)
    elmo = nlp.get_pipe("elmo")
    examples = train_examples(nlp)
    optimizer = nlp.create_optimizer()
    nlp.update(examples, sgd=optimizer)
    assert (elmo.frozen_cache.misses, elmo.frozen_cache.hits, len(elmo.frozen_cache)) == (4, 0, 4)
    nlp.update(examples, sgd=optimizer)
    assert (elmo.frozen_cache.misses, elmo.frozen_cache.hits) == (4, 4)
    cached = elmo.frozen_cache.get(doc_key(examples[0].predicted))
    np.testing.assert_allclose(cached, nlp(examples[0].text)._.elmo.layers, rtol=1e-5, atol=1e-6)


def test_frozen_layer_cache_stays_within_its_budget(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir)
    elmo = nlp.get_pipe("elmo")
    one_doc = nlp.get_pipe("elmo").predict([train_examples(nlp)[0].predicted])[0].nbytes
    elmo.frozen_cache.max_bytes = 2 * one_doc
    for _ in range(2):
        nlp.update(train_examples(nlp), sgd=nlp.create_optimizer())
    assert 0 < elmo.frozen_cache.n_bytes <= 2 * one_doc and len(elmo.frozen_cache) <= 2


def test_fine_tuning_and_a_zero_budget_bypass_the_cache(bilm_dir: Path) -> None:
    for nlp in (make_ner_nlp(bilm_dir, frozen=False), make_ner_nlp(bilm_dir)):
        elmo = nlp.get_pipe("elmo")
        if elmo.frozen:
            elmo.frozen_cache.max_bytes = 0
        nlp.update(train_examples(nlp), sgd=nlp.create_optimizer())
        assert len(elmo.frozen_cache) == 0 and elmo.frozen_cache.misses == 0


def test_ner_on_elmo_handles_empty_and_whitespace_docs(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir)
    train(nlp, 2)
    docs = list(nlp.pipe(["", "   ", "Alice \n\n met Bob 😀 in תל אביב", "x" * 80]))
    assert [len(doc) for doc in docs][:2] == [0, 1]
    assert all(doc._.elmo.layers.shape[1] == len(doc) for doc in docs)


def test_no_autograd_graph_or_tensor_outlives_training_and_prediction(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir, frozen=False)
    train(nlp, 2)
    docs = list(nlp.pipe([text for text, _ in TRAIN_DATA]))
    gc.collect()
    parameters = {id(p) for p in get_bilm(nlp.get_pipe("elmo").model).parameters()}
    graphs = [
        obj
        for obj in gc.get_objects()
        if issubclass(type(obj), torch.Tensor) and id(obj) not in parameters and obj.grad_fn is not None
    ]
    assert graphs == [] and all(isinstance(doc._.elmo.layers, np.ndarray) for doc in docs)


def test_replace_listeners_keeps_a_fine_tuned_biLM_trainable(bilm_dir: Path) -> None:
    nlp = make_ner_nlp(bilm_dir, frozen=False)
    nlp.replace_listeners("elmo", "ner", ["model.tok2vec"])
    assert nlp.get_pipe_config("ner")["model"]["tok2vec"]["frozen"] is False
    (inline,) = [node for node in nlp.get_pipe("ner").model.walk() if node.name == "elmo_layers"]
    assert inline.attrs["frozen"] is False and inline is not nlp.get_pipe("elmo").model


def test_listening_pipeline_gives_the_same_predictions_with_two_processes(bilm_dir: Path) -> None:
    nlp = trained_to_predict_entities(make_ner_nlp(bilm_dir))
    texts = [text for text, _ in TRAIN_DATA] * 2
    single = predicted_entities(nlp, texts, batch_size=2)
    assert predicted_entities(nlp, texts, batch_size=2, n_process=2) == single


def elmo_embed_tok2vec(embed: dict | None) -> dict:
    """The baseline's CNN tok2vec with ELMo as one more input of its embedding layer."""
    return {
        "@architectures": "spacy.Tok2Vec.v2",
        "embed": {
            "@architectures": "spacy-elmo.ElmoEmbed.v1",
            "width": 12,
            "elmo": listener_config(width=None),
            "embed": embed,
        },
        "encode": {
            "@architectures": "spacy.MaxoutWindowEncoder.v2",
            "width": 12,
            "depth": 1,
            "window_size": 1,
            "maxout_pieces": 2,
        },
    }


@pytest.mark.parametrize("embed", [None, {**HASH_EMBED, "width": 12}], ids=["elmo", "elmo+hash-embed"])
def test_elmo_as_an_input_of_a_cnn_tok2vec_trains_and_replaces_its_nested_listener(
    bilm_dir: Path, tmp_path: Path, embed: dict | None
) -> None:
    nlp = make_ner_nlp(bilm_dir, tok2vec=elmo_embed_tok2vec(embed))
    assert nlp.get_pipe("elmo").listening_components == ["ner"]
    tok2vec = next(node for node in nlp.get_pipe("ner").model.walk() if node.has_ref("embed"))
    assert tok2vec.get_ref("embed").get_dim("nO") == 12
    assert tok2vec.predict([nlp.make_doc("Alice moved to Paris.")])[0].shape == (5, 12)
    weights_before = layer_weights(ner_listener(nlp))
    trained_to_predict_entities(nlp)
    assert not np.array_equal(layer_weights(ner_listener(nlp)), weights_before)
    texts = [text for text, _ in TRAIN_DATA] + ["Eve met Alice in Paris."]
    before = predicted_entities(nlp, texts)
    nlp.replace_listeners("elmo", "ner", ["model.tok2vec.embed.elmo"])
    replaced = nlp.get_pipe_config("ner")["model"]["tok2vec"]["embed"]["elmo"]
    assert replaced["@architectures"] == "spacy-elmo.Tok2VecElmo.v1" and replaced["width"] is None
    nlp.remove_pipe("elmo")
    assert predicted_entities(nlp, texts) == before
    nlp.to_disk(tmp_path / "inline")
    assert predicted_entities(spacy.load(tmp_path / "inline"), texts) == before


def test_replacing_listeners_refuses_a_component_with_two_elmo_listeners() -> None:
    from spacy_elmo.pipeline.replace import replace_listener_cfg

    two = {"@architectures": "spacy-elmo.ElmoEmbed.v1", "elmo": listener_config(), "embed": listener_config()}
    with pytest.raises(ElmoPipelineError, match="found 2 spacy-elmo.ElmoListener configs"):
        replace_listener_cfg({"@architectures": "spacy-elmo.ElmoModel.v1"}, two, frozen=True)


def test_an_unfrozen_bilm_serves_no_token_vector_cached_before_an_update(bilm_dir: Path) -> None:
    """Initialisation caches token vectors; Thinc's optimizer then changes the weights in place,
    unseen by torch's version counters, so the training forward pass drops the cache."""
    nlp = make_ner_nlp(bilm_dir, frozen=False)
    optimizer = nlp.create_optimizer()
    for _ in range(2):
        nlp.update(train_examples(nlp), sgd=optimizer)
    text = "Alice moved to Berlin."  # every token was embedded (and cached) in initialisation
    served = nlp(text)._.elmo.layers
    get_bilm(nlp.get_pipe("elmo").model).clear_token_cache()
    assert_within_tolerance(served, nlp(text)._.elmo.layers)  # cached in other batches


def test_listeners_read_the_layers_where_the_component_computed_them(bilm_dir: Path, monkeypatch) -> None:
    """One device seam: `doc._.elmo` keeps the component's own arrays (cupy on a GPU) and the
    listeners read those, never the numpy copy that `doc._.elmo.layers` makes for a user."""
    from spacy_elmo.doc_data import ElmoDocData

    nlp = make_ner_nlp(bilm_dir)
    expected = predicted_entities(nlp, [text for text, _ in TRAIN_DATA])
    computed = nlp.get_pipe("elmo").predict([nlp.make_doc(TRAIN_DATA[0][0])])[0]
    doc = nlp.make_doc(TRAIN_DATA[0][0])
    nlp.get_pipe("elmo").set_annotations([doc], [computed])
    assert doc._.elmo.device_layers is computed

    def no_host_copy(self: ElmoDocData) -> None:
        raise AssertionError("a listener read the host copy of the layers")

    monkeypatch.setattr(ElmoDocData, "layers", property(no_host_copy))
    assert predicted_entities(nlp, [text for text, _ in TRAIN_DATA]) == expected
