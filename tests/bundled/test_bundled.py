"""The bundled English biLM: loadable as package data, described by its card, used by default,
and contextual: same-sense uses of a word are closer than different-sense uses."""

import json
from itertools import combinations, product
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from safetensors.torch import load_file
from spacy.training import Example
from typer.testing import CliRunner

from spacy_elmo.bilm.model import BiLM
from spacy_elmo.bundled import BUNDLED_NAME, BUNDLED_PATH, bundled_card, load_bundled_bilm
from spacy_elmo.cli import app
from tests.conftest import REPO_ROOT

CONTEXTUAL_LAYERS = slice(1, None)  # the biLSTM layers; layer 0 is the context-free token layer
SENSE_SETS = {
    name: json.loads((Path(__file__).parent / f"{name}.json").read_text(encoding="utf8"))
    for name in ("word_senses", "word_senses_second")
}
SENSES = SENSE_SETS["word_senses"]
# An untrained biLM of the bundled shape averages within +-0.0015 on both sets (seeds 0, 1, 2); the
# bundled 1.7 averages +0.026 (word_senses) and +0.023 (word_senses_second).
MEAN_MARGIN_FLOOR = 0.01


@pytest.fixture(scope="module")
def bundled_bilm():
    return load_bundled_bilm()


def test_the_bundled_model_fits_the_size_budget_and_its_card_has_every_fact():
    assert sum(path.stat().st_size for path in BUNDLED_PATH.iterdir()) <= 30 * 1024 * 1024
    card = bundled_card()
    for field in ("corpus", "licences", "tokens_seen", "steps", "hours", "hardware", "stages"):
        assert card[field], field
    for split, measure in product(("dev", "test"), ("", "sentence_")):
        assert 1.0 < card[f"{split}_{measure}perplexity"] < card["untrained_perplexity"]
        assert card[f"{split}_{measure}tokens"] > 10_000


def test_the_training_stages_cover_every_step():
    card = bundled_card()
    next_step = 1
    for stage in card["stages"]:
        first, last = stage["steps"]
        assert first == next_step <= last, stage["steps"]
        assert all(first <= step <= last for step in stage["released"].values()), stage["released"]
        next_step = last + 1
    assert next_step - 1 == card["steps"]
    assert card["stages"][-1]["released"] == {card["version"]: card["steps"]}


def test_add_pipe_without_config_uses_the_bundled_model(bundled_bilm):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    doc = nlp("The bank raised its rates .")
    expected = bundled_bilm.embed_sentences([[token.text for token in doc]])[0]
    assert doc._.elmo.layers.shape == expected.shape
    assert np.allclose(doc._.elmo.layers, expected, atol=1e-5)


def initialized_with_null_path(lang: str):
    from spacy_elmo.pipeline.loaders import configure_model_dir_loader

    nlp = spacy.blank(lang)
    example = Example.from_dict(nlp.make_doc("Ein Satz ."), {})
    nlp.add_pipe("elmo").initialize(lambda: [example], nlp=nlp, loader=configure_model_dir_loader(None))
    return nlp


def test_a_model_dir_loader_without_a_path_gives_an_english_pipeline_the_bundled_model(bundled_bilm):
    from spacy_elmo.pipeline.layers import get_bilm

    loaded = get_bilm(initialized_with_null_path("en").get_pipe("elmo").model)
    for name, tensor in bundled_bilm.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


@pytest.mark.parametrize(
    ("lang", "routes"),
    [
        ("de", "--paths.elmo de or --paths.elmo efml-de"),
        ("xx", "--paths.elmo efml-cu or"),
        ("yo", "none is listed"),
    ],
)
def test_a_pipeline_in_another_language_without_weights_gets_no_english_bilm(lang, routes):
    from spacy_elmo.pipeline.errors import ElmoWeightsError

    with pytest.raises(ElmoWeightsError, match=f"language is '{lang}'.*English only") as error:
        initialized_with_null_path(lang)
    assert routes in str(error.value) and "--paths.elmo DIR" in str(error.value)
    nlp = spacy.blank(lang)
    nlp.add_pipe("elmo")
    with pytest.raises(ElmoWeightsError, match="English only"):
        nlp("Ein Satz .")


def test_info_describes_the_bundled_model_by_default():
    result = CliRunner().invoke(app, ["info"])
    assert result.exit_code == 0, result.output
    card = bundled_card()
    assert BUNDLED_NAME in result.output
    assert f"{card['tokens_seen']:,}" in result.output
    assert f"{card['dev_perplexity']:.1f}" in result.output
    assert f"dev {card['dev_sentence_perplexity']:.1f}" in result.output
    assert "MODEL_CARD.md" in result.output
    assert f"{len(card['stages'])} stages (adagrad then adam)" in result.output
    assert card["stages"][-1]["command"] not in result.output  # the history is in the card, not here
    assert len(result.output.splitlines()) <= 25
    assert "50,000-word vocabulary (lm_head.safetensors)" in result.output


def _sense_vectors(bilm, word: str, sentences: list[str], layers: slice) -> np.ndarray:
    """(n_sentences, 2P): the mean of the chosen layers at the word's position in each sentence."""
    tokenized = [sentence.split() for sentence in sentences]
    positions = [[token.lower() for token in tokens].index(word) for tokens in tokenized]
    embedded = bilm.embed_sentences(tokenized)
    return np.stack([layer[layers, position].mean(0) for layer, position in zip(embedded, positions)])


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def sense_margins(
    bilm, layers: slice = CONTEXTUAL_LAYERS, sense_set: str = "word_senses"
) -> dict[str, float]:
    """Per word: mean cosine of same-sense pairs minus mean cosine of different-sense pairs."""
    margins = {}
    for word, senses in SENSE_SETS[sense_set].items():
        if word.startswith("_"):
            continue
        first, second = (_sense_vectors(bilm, word, sentences, layers) for sentences in senses.values())
        same = [_cosine(a, b) for group in (first, second) for a, b in combinations(group, 2)]
        different = [_cosine(a, b) for a, b in product(first, second)]
        margins[word] = float(np.mean(same) - np.mean(different))
    return margins


@pytest.mark.xfail(
    strict=True,
    reason="en_elmo_cpu does not separate these senses yet (measured per-word margins -0.016 to +0.067, "
    "6 of 8 positive): see its MODEL_CARD.md. Strict: a biLM that passes turns this into a failure "
    "to update.",
)
def test_contextual_vectors_separate_word_senses(bundled_bilm):
    margins = sense_margins(bundled_bilm)
    assert len(margins) == 8
    assert all(margin > 0 for margin in margins.values()), margins


@pytest.mark.parametrize("sense_set", SENSE_SETS)
def test_on_average_same_sense_uses_are_closer_than_different_sense_uses(bundled_bilm, sense_set):
    """The weaker claim the bundled biLM meets: senses separate on average, if not for every word."""
    margins = sense_margins(bundled_bilm, sense_set=sense_set)
    assert np.mean(list(margins.values())) > MEAN_MARGIN_FLOOR, margins


@pytest.mark.parametrize("sense_set", SENSE_SETS)
def test_an_untrained_bilm_separates_no_senses_on_average(bundled_bilm, sense_set):
    """Control for the test above: the same shape with random weights stays under its floor."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        untrained = BiLM(bundled_bilm.config).eval()
    margins = sense_margins(untrained, sense_set=sense_set)
    assert abs(np.mean(list(margins.values()))) < MEAN_MARGIN_FLOOR, margins


def test_the_sense_measure_sees_no_senses_in_the_context_free_token_layer(bundled_bilm):
    """Control: layer 0 (the char CNN) gives every use of a word the same vector, so margin 0."""
    margins = sense_margins(bundled_bilm, layers=slice(0, 1))
    assert all(abs(margin) < 1e-6 for margin in margins.values()), margins


@pytest.fixture
def sense_text(tmp_path) -> Path:
    """Every sentence of the sense test set, one per line: English the biLM was not trained on."""
    sentences = [
        sentence
        for word, senses in SENSES.items()
        if not word.startswith("_")
        for sentences in senses.values()
        for sentence in sentences
    ]
    path = tmp_path / "senses.txt"
    path.write_text("\n".join(sentences) + "\n", encoding="utf8")
    return path


def test_the_bundled_softmax_head_predicts_held_out_english(sense_text, tmp_path):
    """`evaluate en_elmo_cpu` finds the bundled head (stored in fp16) and its vocabulary."""
    result = CliRunner().invoke(
        app, ["evaluate", BUNDLED_NAME, str(sense_text), "--output", str(tmp_path / "scores.json")]
    )
    assert result.exit_code == 0, result.output
    scores = json.loads((tmp_path / "scores.json").read_text(encoding="utf8"))
    # Measured: 104 with version 1.4 (115 with 1.3, 139 with 1.2, 297 with 1.1). Untrained, the
    # model is at ~50,000 (the card's untrained_perplexity); with 1.1's head rows shuffled against
    # vocab.txt, 863,698.
    assert scores["perplexity"] < bundled_card()["untrained_perplexity"] / 20, scores


@pytest.mark.slow
def test_fine_tune_starts_from_the_bundled_model_and_its_head(sense_text, tmp_path):
    output = tmp_path / "tuned"
    config = REPO_ROOT / "configs" / "pretrain_cpu.cfg"
    overrides = [
        "--paths.train",
        str(sense_text),
        "--paths.dev",
        str(sense_text),
        "--training.max_steps",
        "1",
    ]
    overrides += [
        "--training.learning_rate",
        "1e-9",
        "--training.batch_size",
        "4",
        "--training.eval_every",
        "1",
    ]
    result = CliRunner().invoke(app, ["fine-tune", BUNDLED_NAME, str(config), str(output), *overrides])
    assert result.exit_code == 0, result.output
    # One step at a learning rate of 1e-9 leaves every weight where it started: the bundled biLM and
    # head (Adagrad's first step moves a weight by at most the learning rate).
    for file in ("model.safetensors", "lm_head.safetensors"):
        tuned, bundled = load_file(str(output / file)), load_file(str(BUNDLED_PATH / file))
        assert tuned.keys() == bundled.keys()
        for name, tensor in bundled.items():
            assert torch.allclose(tuned[name], tensor.float(), rtol=0, atol=1e-8), (file, name)
    assert (output / "vocab.txt").read_text(encoding="utf8") == (BUNDLED_PATH / "vocab.txt").read_text(
        encoding="utf8"
    )
