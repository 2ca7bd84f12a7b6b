"""The `elmo` component: outputs, edge cases, long docs, weight loading and serialization."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import spacy
import srsly
import torch
from spacy.tokens import Doc, DocBin
from thinc.api import ConfigValidationError

from spacy_elmo.bilm import BiLM, ScalarMix, auto_precision
from spacy_elmo.bilm.errors import ElmoError
from spacy_elmo.pipeline import ElmoPipelineError
from spacy_elmo.pipeline.layers import get_bilm

from ..bilm.random_weights import write_random_elmo
from ..numerics import assert_within_tolerance
from .conftest import TEXTS, loader_config, make_nlp, tiny_bilm


def test_add_pipe_works_without_importing_the_package(bilm_dir: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        import spacy
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo")
        nlp.config["initialize"]["components"]["elmo"] = {{
            "loader": {{"@misc": "spacy-elmo.ModelDir.v1", "path": {str(bilm_dir)!r}}}
        }}
        nlp.initialize()
        doc = nlp("Hello world")
        print(doc._.elmo.layers.shape, doc[0]._.elmo.shape)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[0] == "(3, 2, 16) (16,)"


def test_layers_match_the_bilm_and_token_vector_is_the_layer_mean(nlp: spacy.Language) -> None:
    doc = nlp("The bank raised rates near the river bank.")
    layers = doc._.elmo.layers
    assert layers.dtype == np.float32 and layers.shape == (3, len(doc), 16)
    expected = tiny_bilm().embed_sentences([[token.text for token in doc]])[0]
    np.testing.assert_allclose(layers, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(doc[1]._.elmo, layers[:, 1].mean(axis=0), rtol=1e-6, atol=1e-7)


def test_mix_weights_and_gamma_define_the_token_vector(nlp_factory) -> None:
    nlp = nlp_factory(mix_weights=[0.0, 1.0, 3.0], mix_gamma=2.0)
    doc = nlp("river bank")
    expected = 2.0 * (0.25 * doc._.elmo.layers[1, 0] + 0.75 * doc._.elmo.layers[2, 0])
    np.testing.assert_allclose(doc[0]._.elmo, expected, rtol=1e-6)


def test_token_span_and_doc_vectors_are_the_scalar_mix_a_listener_would_compute(nlp_factory) -> None:
    """`token._.elmo` and the vector hooks go through `bilm.ScalarMix`'s arithmetic: a ScalarMix
    whose softmax gives the configured shares reproduces them."""
    nlp = nlp_factory(mix_weights=[1.0, 2.0, 5.0], mix_gamma=0.5, vector_hooks=True)
    doc = nlp("The bank raised rates near the river bank.")
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.weights.copy_(torch.log(torch.tensor([1.0, 2.0, 5.0])))
        mix.gamma.fill_(0.5)
    expected = mix(torch.from_numpy(doc._.elmo.layers)).detach().numpy()  # (n, 2P)
    np.testing.assert_allclose(np.stack([token._.elmo for token in doc]), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(doc[2:5].vector, expected[2:5].mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(doc.vector, expected.mean(axis=0), rtol=1e-5, atol=1e-6)
    vector = doc[1]._.elmo
    vector[:] = 0.0  # a token's vector is its own copy: the doc's computed-once mix is untouched
    np.testing.assert_allclose(doc[1]._.elmo, expected[1], rtol=1e-5, atol=1e-6)
    assert not doc._.elmo.mixed.flags.writeable


def test_mix_weights_of_the_wrong_length_are_reported(bilm_dir: Path) -> None:
    with pytest.raises(ElmoPipelineError, match="mix_weights has 2 values but the biLM has 3 layers"):
        make_nlp(bilm_dir, {"mix_weights": [1.0, 1.0]})


def test_empty_doc_gives_empty_layers(nlp: spacy.Language) -> None:
    doc = nlp("")
    assert doc._.elmo.layers.shape == (3, 0, 16)
    assert list(nlp.pipe(["", "a", ""])) and nlp("").to_bytes()


def test_whitespace_tokens_get_zeros_and_do_not_change_their_neighbours(nlp: spacy.Language) -> None:
    spaced = nlp("river  bank\n\nflows")
    assert [token.is_space for token in spaced] == [False, True, False, True, False]
    plain = nlp("river bank flows")
    np.testing.assert_array_equal(spaced._.elmo.layers[:, [1, 3]], 0.0)
    np.testing.assert_allclose(spaced._.elmo.layers[:, [0, 2, 4]], plain._.elmo.layers, rtol=1e-6)
    only_space = nlp.make_doc("   ")
    assert nlp(only_space)._.elmo.layers.shape == (3, 1, 16)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 120 + " short",
        "Smile 😀👍🏽 please",
        "bell\x07 null\x00 tab",
        "שלום עולם مرحبا بالعالم",
        "a\u200bb",
    ],
)
def test_unusual_tokens_are_embedded(nlp: spacy.Language, text: str) -> None:
    doc = nlp(text)
    layers = doc._.elmo.layers
    assert layers.shape == (3, len(doc), 16) and np.isfinite(layers).all()
    non_space = [token.i for token in doc if not token.is_space]
    assert np.abs(layers[:, non_space]).sum(axis=(0, 2)).min() > 0


def test_long_token_is_truncated_like_the_bilm_does(nlp: spacy.Language) -> None:
    long_doc = nlp("a" * 48 + "XYZ tail")
    truncated_doc = nlp("a" * 48 + " tail")
    np.testing.assert_allclose(long_doc._.elmo.layers, truncated_doc._.elmo.layers, rtol=1e-6)


def test_sentences_are_embedded_independently(nlp: spacy.Language) -> None:
    words = ["The", "bank", "closed", ".", "Rivers", "flow", "."]
    doc = Doc(nlp.vocab, words=words, sent_starts=[True, False, False, False, True, False, False])
    layers = nlp(doc)._.elmo.layers
    second = nlp(Doc(nlp.vocab, words=words[4:]))._.elmo.layers
    np.testing.assert_allclose(layers[:, 4:], second, rtol=1e-5, atol=1e-6)


def test_docs_without_sentences_are_read_in_windows_of_max_length(bilm_dir: Path) -> None:
    nlp = make_nlp(bilm_dir, {"model": {"@architectures": "spacy-elmo.ElmoModel.v1", "max_length": 4}})
    words = [f"w{index}" for index in range(10)]
    layers = nlp(Doc(nlp.vocab, words=words))._.elmo.layers
    window = nlp(Doc(nlp.vocab, words=words[4:8]))._.elmo.layers
    np.testing.assert_allclose(layers[:, 4:8], window, rtol=1e-5, atol=1e-6)
    big = nlp(Doc(nlp.vocab, words=["tok"] * 10_000))
    assert big._.elmo.layers.shape == (3, 10_000, 16)


def test_batches_of_mixed_lengths_give_the_same_vectors_as_single_docs(nlp: spacy.Language) -> None:
    together = list(nlp.pipe(TEXTS, batch_size=8))
    for text, doc in zip(TEXTS, together):
        np.testing.assert_allclose(doc._.elmo.layers, nlp(text)._.elmo.layers, rtol=1e-5, atol=1e-6)


def assert_weights_are_safetensors(model_file: Path, bilm: BiLM) -> None:
    """The biLM inside the component's thinc model: msgpack {options, safetensors bytes}, no pickle."""
    (shim_bytes,) = srsly.msgpack_loads(model_file.read_bytes())["shims"][0]
    state = srsly.msgpack_loads(srsly.msgpack_loads(shim_bytes)["state"])
    assert set(state) == {"options", "weights"} and state["options"] == bilm.config.to_allennlp_options()
    tensors = safetensors.torch.load(state["weights"])
    expected = bilm.state_dict()
    assert set(tensors) == set(expected) and all(
        torch.equal(tensors[name], expected[name]) for name in expected
    )


def test_to_disk_and_load_need_no_original_files(tmp_path: Path) -> None:
    weights = tmp_path / "bilm"
    tiny_bilm(seed=3).save(weights)
    nlp = make_nlp(weights)
    expected = [doc._.elmo.layers for doc in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / "pipeline")
    for file in weights.iterdir():
        file.unlink()
    weights.rmdir()
    assert_weights_are_safetensors(tmp_path / "pipeline" / "elmo" / "model", tiny_bilm(seed=3))
    loaded = spacy.load(tmp_path / "pipeline")
    for layers, doc in zip(expected, loaded.pipe(TEXTS)):
        np.testing.assert_array_equal(doc._.elmo.layers, layers)
    copy = spacy.blank("en")
    copy.add_pipe("elmo").from_bytes(loaded.get_pipe("elmo").to_bytes())
    for layers, doc in zip(expected, copy.pipe(TEXTS)):
        np.testing.assert_array_equal(doc._.elmo.layers, layers)


def test_allennlp_weights_give_the_bilm_outputs(tmp_path: Path) -> None:
    options_file, weight_file = write_random_elmo(tmp_path)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = {
        "loader": {
            "@misc": "spacy-elmo.AllenNLP.v1",
            "options_file": str(options_file),
            "weight_file": str(weight_file),
        }
    }
    nlp.initialize()
    doc = nlp("Contextual vectors for every token")
    expected = BiLM.from_allennlp(options_file, weight_file).embed_sentences([[t.text for t in doc]])[0]
    np.testing.assert_allclose(doc._.elmo.layers, expected, rtol=1e-5, atol=1e-6)


def test_missing_weight_files_are_reported_with_the_config_key(tmp_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = loader_config(tmp_path / "absent")
    with pytest.raises(ElmoError, match="does not exist"):
        nlp.initialize()


def test_doc_data_round_trips_through_doc_bytes_and_docbin(nlp: spacy.Language) -> None:
    docs = list(nlp.pipe(TEXTS))
    restored = Doc(nlp.vocab).from_bytes(docs[0].to_bytes())
    np.testing.assert_array_equal(restored._.elmo.layers, docs[0]._.elmo.layers)
    np.testing.assert_array_equal(restored[2]._.elmo, docs[0][2]._.elmo)
    doc_bin = DocBin(store_user_data=True, docs=docs)
    for original, loaded in zip(docs, DocBin().from_bytes(doc_bin.to_bytes()).get_docs(nlp.vocab)):
        np.testing.assert_array_equal(loaded._.elmo.layers, original._.elmo.layers)


def test_doc_cleaner_releases_the_layers(nlp: spacy.Language) -> None:
    nlp.add_pipe("doc_cleaner", config={"attrs": {"_.elmo": None}})
    doc = nlp("Nothing stays behind")
    assert doc._.elmo is None and doc[0]._.elmo is None


def test_stored_layers_are_plain_numpy_copies(nlp: spacy.Language) -> None:
    first, second = nlp.pipe(["one two", "three four five"])
    for doc in (first, second):
        assert type(doc._.elmo.layers) is np.ndarray and doc._.elmo.layers.base is None


def test_vector_hooks_are_opt_in(nlp_factory) -> None:
    plain = nlp_factory()("river bank")
    assert not plain[0].has_vector
    doc = nlp_factory(vector_hooks=True)("river bank money bank")
    assert doc[1].has_vector
    np.testing.assert_array_equal(doc[1].vector, doc[1]._.elmo)
    np.testing.assert_allclose(doc.vector, doc._.elmo.mixed.mean(axis=0), rtol=1e-6)
    similarity = doc[1].similarity(doc[3])
    assert -1.0 <= similarity <= 1.0 and similarity != doc[0].similarity(doc[3])
    assert doc[0:2].similarity(doc[2:4]) == pytest.approx(
        float(
            np.dot(doc[0:2].vector, doc[2:4].vector)
            / np.linalg.norm(doc[0:2].vector)
            / np.linalg.norm(doc[2:4].vector)
        )
    )


def test_multiprocessing_gives_the_same_vectors(nlp: spacy.Language) -> None:
    texts = TEXTS * 3
    single = [doc._.elmo.layers for doc in nlp.pipe(texts, n_process=1, batch_size=4)]
    multi = [doc._.elmo.layers for doc in nlp.pipe(texts, n_process=2, batch_size=4)]
    for one, two in zip(single, multi):
        assert_within_tolerance(two, one)  # forked children run on one thread


@pytest.mark.parametrize(
    "config, message",
    [
        ({"mix_weights": [1.0, -1.0, 1.0]}, "mix_weights"),
        ({"frozen_cache_mb": -1}, "frozen_cache_mb"),
        ({"model": {"@architectures": "spacy-elmo.ElmoModel.v1", "max_length": 0}}, "max_length"),
    ],
)
def test_invalid_settings_name_the_setting(config: dict, message: str) -> None:
    with pytest.raises(ElmoPipelineError, match=message):
        spacy.blank("en").add_pipe("elmo", config=config)


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_reduced_precision_runs_the_frozen_bilm_and_survives_serialization(nlp_factory, precision) -> None:
    exact = nlp_factory()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bf16 on a CPU without bf16 instructions warns, and runs
        fast = nlp_factory(precision=precision)
        assert get_bilm(fast.get_pipe("elmo").model).precision == precision
        assert get_bilm(exact.get_pipe("elmo").model).precision == "fp32"
        exact_layers = exact(TEXTS[0])._.elmo.layers
        fast_layers = fast(TEXTS[0])._.elmo.layers
        difference = float(np.abs(fast_layers - exact_layers).max())
        assert 0 < difference < 0.05
        restored = spacy.blank("en")
        restored.add_pipe("elmo", config={"precision": precision})
        restored.from_bytes(fast.to_bytes())
        assert get_bilm(restored.get_pipe("elmo").model).precision == precision
        np.testing.assert_allclose(restored(TEXTS[0])._.elmo.layers, fast_layers, atol=1e-6)


def test_auto_precision_is_measured_on_the_machine_that_runs_it_and_logged_once(
    nlp_factory, tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path))
    # Enough budget to time every product of the tiny model even on a loaded machine (each is
    # timed at most MAX_ROUNDS times): a budget that runs out leaves products for the reload to
    # time, whose changed plan is then rightly logged a second time.
    monkeypatch.setattr(auto_precision, "BUDGET_SECONDS", 30.0)
    # Timings whose fp32 calls vary beyond NOISY are rightly not cached, so on a loaded machine
    # the reload would time again and may log a second plan: this test is about the cache.
    monkeypatch.setattr(auto_precision, "NOISY", float("inf"))
    with caplog.at_level(logging.INFO, logger="spacy_elmo.pipeline.component"):
        nlp = nlp_factory(precision="auto")
        nlp.get_pipe("elmo").from_bytes(nlp.get_pipe("elmo").to_bytes())  # the same plan, from the cache
    assert nlp.get_pipe("elmo").precision == "auto"
    bilm = get_bilm(nlp.get_pipe("elmo").model)
    assert bilm.precision == "auto" and bilm.precision_plan.timings
    assert set(bilm.precision_plan.modes) == set(bilm.product_sites())
    logged = [record.getMessage() for record in caplog.records if "precision 'auto'" in record.getMessage()]
    assert len(logged) == 1 and "lstm.layers.0.recurrent" in logged[0], logged


def test_the_removed_int8_setting_is_an_unknown_setting() -> None:
    """0.1.0 has one way to ask for int8 products: `precision = "int8"`."""
    with pytest.raises(ConfigValidationError, match="int8"):
        spacy.blank("en").add_pipe("elmo", config={"int8": True})


@pytest.mark.parametrize(
    "config, message",
    [
        ({"precision": "int8", "frozen": False}, "precision = 'int8' needs frozen = true"),
        ({"precision": "fp16"}, "precision = 'fp16': use one of fp32, bf16, int8, auto"),
    ],
)
def test_precision_mistakes_are_named(config: dict, message: str) -> None:
    with pytest.raises(ElmoPipelineError, match=message):
        spacy.blank("en").add_pipe("elmo", config=config)


def test_a_damaged_model_file_is_named(nlp: spacy.Language, tmp_path: Path) -> None:
    nlp.to_disk(tmp_path / "pipeline")
    model_file = tmp_path / "pipeline" / "elmo" / "model"
    model_file.write_bytes(model_file.read_bytes()[:1000])  # a copy cut short
    with pytest.raises(ElmoPipelineError, match=rf"{re.escape(str(model_file))} .*incomplete input.*damaged"):
        spacy.load(tmp_path / "pipeline")
    with pytest.raises(ElmoPipelineError, match=r"the serialized 'elmo' component cannot be read"):
        spacy.blank("en").add_pipe("elmo").from_bytes(nlp.get_pipe("elmo").to_bytes()[:1000])


def test_threads_calling_a_new_pipeline_at_once_load_the_bundled_bilm_once(monkeypatch) -> None:
    import threading

    import spacy_elmo.bundled

    loads: list[BiLM] = []
    load = spacy_elmo.bundled.load_bundled_bilm

    def counted_load(**kwargs) -> BiLM:
        loads.append(load(**kwargs))
        return loads[-1]

    monkeypatch.setattr(spacy_elmo.bundled, "load_bundled_bilm", counted_load)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    start = threading.Barrier(8)
    docs: list[Doc] = []

    def call() -> None:
        start.wait()
        docs.append(nlp("Eight threads ask at once."))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(docs) == 8 and len(loads) == 1
    assert get_bilm(nlp.get_pipe("elmo").model) is loads[0]
