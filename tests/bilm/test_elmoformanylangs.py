"""ELMoForManyLangs models: every layer as the `elmoformanylangs` package computes it, the lexicon,
our files, and the errors of a broken model directory."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, ConfigError, InputError, WeightFileError
from spacy_elmo.bilm.io.elmoformanylangs import PUBLISHED_MODEL_CONFIGS, read_dictionary
from spacy_elmo.bilm.io.model_dir import LEXICON_FILE
from spacy_elmo.bilm.lexicon import UNKNOWN_CHARACTER_ROW, WORD_END_ROW, WORD_START_ROW

from .efml_models import CHARACTERS, efml_layers, write_random_efml

TOLERANCE = 1e-5
SENTENCES = [
    ["the", "bank", "raised", "rates", "."],
    ["Die", "Bank", "hat", "die", "Zinsen", "erhöht", "."],
    ["天気", "晴れ", "€", "ñandú"],  # 晴, れ, €, ñ and ú are outside the lexicon: <oov>
    ["x" * 60, "y" * 49, "z" * 48, "the" + "q" * 50],  # cut to 48 characters; the word too
    ["one"],
    [],
    ["\u3000", "a b", ""],  # the ideographic space (a char.dic line with one field), a space, empty
    ["<bos>", "the", "<eos>"],  # read as the sentence markers, as the package reads them
    ["ñu", "çu", "ñu"],  # one char row, two words
]


@pytest.fixture(autouse=True)
def quiet_oracle():
    logging.getLogger("elmoformanylangs").setLevel(logging.ERROR)


@pytest.fixture(scope="module", params=[5, 0], ids=["word-embedding", "characters-only"])
def efml_dir(request, tmp_path_factory):
    return write_random_efml(tmp_path_factory.mktemp("efml") / "model", word_dim=request.param)


def largest_difference(expected: list[np.ndarray], ours: list[np.ndarray]) -> list[float]:
    """Per layer, the largest absolute difference over every sentence."""
    differences = [0.0, 0.0, 0.0]
    for sentence_expected, sentence_ours in zip(expected, ours, strict=True):
        assert sentence_ours.shape == sentence_expected.shape
        for layer in range(3):
            if sentence_expected.size:
                difference = np.abs(sentence_ours[layer] - sentence_expected[layer]).max()
                differences[layer] = max(differences[layer], float(difference))
    return differences


def test_every_layer_matches_the_package(efml_dir):
    expected = efml_layers(efml_dir, SENTENCES)
    bilm = BiLM.from_elmoformanylangs(efml_dir)
    assert max(largest_difference(expected, bilm.embed_sentences(SENTENCES))) < TOLERANCE
    assert max(largest_difference(expected, bilm.embed_sentences(SENTENCES, batch_size=1))) < TOLERANCE
    assert max(largest_difference(expected, bilm.embed_sentences(SENTENCES))) < TOLERANCE  # cache warm


@pytest.mark.slow
def test_the_published_shape_matches_the_package(tmp_path):
    """4096-cell LSTMs, 2048 filters, a 100-d word embedding, the model JSON named but not present
    (the package's own configs/ copy, which we ship)."""
    name = "cnn_50_100_512_4096_sample.json"
    model_dir = write_random_efml(
        tmp_path / "model", word_dim=100, model_json=PUBLISHED_MODEL_CONFIGS[name], config_path=name
    )
    (model_dir / "tiny_model.json").unlink()
    sentences = [SENTENCES[1], SENTENCES[2], SENTENCES[3], SENTENCES[5]]
    expected = efml_layers(model_dir, sentences)
    bilm = BiLM.from_elmoformanylangs(model_dir)
    assert bilm.config.n_filters == 2048 and bilm.config.token_features == 2148
    assert max(largest_difference(expected, bilm.embed_sentences(sentences))) < TOLERANCE


def test_tokens_start_with_eows_row_and_end_with_bows_row_as_the_models_were_trained(efml_dir):
    """The package's frontend gives position 0 the id of <eow> and the end the id of <bow>."""
    bilm = BiLM.from_elmoformanylangs(efml_dir)
    table = torch.load(efml_dir / "token_embedder.pkl", weights_only=True)["char_emb_layer.embedding.weight"]
    char_ids = read_dictionary(efml_dir / "char.dic")
    ours = bilm.token_encoder.char_embedding.detach()
    assert torch.equal(ours[WORD_START_ROW], table[char_ids["<eow>"]])
    assert torch.equal(ours[WORD_END_ROW], table[char_ids["<bow>"]])
    assert torch.equal(ours[UNKNOWN_CHARACTER_ROW], table[char_ids["<oov>"]])
    ids, _ = bilm.sentences_to_ids([["ab", "€"]])
    assert ids[0, 0, :4].tolist() == [WORD_START_ROW + 1, bilm.lexicon.characters["a"] + 1] + [
        bilm.lexicon.characters["b"] + 1,
        WORD_END_ROW + 1,
    ]
    assert ids[0, 1, 1] == UNKNOWN_CHARACTER_ROW + 1


def test_words_that_share_a_char_row_keep_their_own_vectors_through_the_type_cache(tmp_path):
    bilm = BiLM.from_elmoformanylangs(write_random_efml(tmp_path / "model"))
    char_ids, word_ids = bilm.sentences_to_ids([["ñu", "çu"]])
    assert torch.equal(char_ids[0, 0], char_ids[0, 1]) and word_ids[0, 0] != word_ids[0, 1]
    uncached = BiLM.from_elmoformanylangs(tmp_path / "model")
    uncached.token_cache.max_entries = 0
    first = bilm.embed_sentences([["ñu", "çu"]])[0]
    assert not np.allclose(first[0, 0], first[0, 1])
    cached_types = len(bilm.token_cache)
    again = bilm.embed_sentences([["çu", "ñu"]])[0]  # both types come from the cache now
    assert len(bilm.token_cache) == cached_types == 4  # <bos>, ñu, çu, <eos>
    np.testing.assert_array_equal(again[0, ::-1], first[0])
    np.testing.assert_allclose(uncached.embed_sentences([["ñu", "çu"]])[0], first, atol=1e-6)


def test_a_converted_model_saves_its_lexicon_and_loads_to_the_same_outputs(efml_dir, tmp_path):
    bilm = BiLM.from_elmoformanylangs(efml_dir)
    bilm.save(tmp_path / "ours")
    assert (tmp_path / LEXICON_FILE).exists() is False and (tmp_path / "ours" / LEXICON_FILE).is_file()
    document = json.loads((tmp_path / "ours" / LEXICON_FILE).read_text(encoding="utf8"))
    assert document["characters"]["天"] == bilm.lexicon.characters["天"]
    loaded = BiLM.load(tmp_path / "ours")
    assert loaded.config == bilm.config and loaded.lexicon == bilm.lexicon
    for ours, theirs in zip(loaded.embed_sentences(SENTENCES), bilm.embed_sentences(SENTENCES), strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_a_lexicon_model_cannot_be_written_as_allennlp_files(efml_dir, tmp_path):
    with pytest.raises(ConfigError, match="character lexicon"):
        BiLM.from_elmoformanylangs(efml_dir).to_allennlp(tmp_path / "options.json", tmp_path / "weights.hdf5")


def test_word_ids_are_required_exactly_when_there_is_a_word_embedding(tmp_path):
    with_words = BiLM.from_elmoformanylangs(write_random_efml(tmp_path / "words"))
    char_ids, word_ids = with_words.sentences_to_ids([["the", "bank"]])
    with pytest.raises(InputError, match="pass word_ids"):
        with_words(char_ids)
    with pytest.raises(InputError, match=r"Word ids of tokens must lie in 1\.\.18"):
        with_words(char_ids, word_ids=word_ids * 0)
    without_words = BiLM.from_elmoformanylangs(write_random_efml(tmp_path / "chars", word_dim=0))
    assert without_words.sentences_to_ids([["the"]])[1] is None
    with pytest.raises(InputError, match="no word embedding"):
        without_words(char_ids, word_ids=word_ids)


def test_char_ids_beyond_the_lexicon_are_an_input_error(tmp_path):
    bilm = BiLM.from_elmoformanylangs(write_random_efml(tmp_path / "model", word_dim=0))
    char_ids, _ = bilm.sentences_to_ids([["the"]])
    char_ids[0, 0, 1] = bilm.config.n_char_ids
    with pytest.raises(InputError, match=f"must lie in 0..{bilm.config.n_char_ids - 1}"):
        bilm(char_ids)


def test_a_lexicon_model_built_without_its_lexicon_says_how_to_load_it(tmp_path):
    bilm = BiLM.from_elmoformanylangs(write_random_efml(tmp_path / "model"))
    with pytest.raises(InputError, match="from_elmoformanylangs"):
        BiLM(bilm.config).embed_sentences([["the"]])


# -- a broken model directory ------------------------------------------------------------------


def test_a_missing_file_is_named(tmp_path):
    model_dir = write_random_efml(tmp_path / "model")
    (model_dir / "encoder.pkl").unlink()
    with pytest.raises(ConfigError, match="encoder.pkl is missing"):
        BiLM.from_elmoformanylangs(model_dir)


def test_a_pickled_object_is_refused_not_unpickled(tmp_path):
    model_dir = write_random_efml(tmp_path / "model")
    torch.save({"module": torch.nn.Linear(2, 2)}, model_dir / "encoder.pkl")
    with pytest.raises(WeightFileError, match="encoder.pkl holds more than tensors"):
        BiLM.from_elmoformanylangs(model_dir)


def test_a_model_json_that_cannot_be_found_is_explained(tmp_path):
    model_dir = write_random_efml(tmp_path / "model", config_path="/somewhere/else/mine.json")
    with pytest.raises(ConfigError, match="config_path '/somewhere/else/mine.json'.*Copy the model JSON"):
        BiLM.from_elmoformanylangs(model_dir)


def test_a_model_json_named_by_an_absolute_path_is_found_beside_config_json(tmp_path):
    model_dir = write_random_efml(tmp_path / "model", config_path="/home/someone/configs/tiny_model.json")
    assert BiLM.from_elmoformanylangs(model_dir).config.lstm_dim == 24


def test_a_broken_dictionary_line_is_named(tmp_path):
    model_dir = write_random_efml(tmp_path / "model")
    with open(model_dir / "char.dic", "a", encoding="utf8") as handle:
        handle.write("x\ty\tz\n")
    line = len(CHARACTERS) + 6 + 1  # after the characters and the six markers
    with pytest.raises(ConfigError, match=rf"char.dic, line {line}: expected `entry<TAB>id`"):
        BiLM.from_elmoformanylangs(model_dir)


def test_a_dictionary_for_other_weights_is_named(tmp_path):
    model_dir = write_random_efml(tmp_path / "model")
    with open(model_dir / "word.dic", "a", encoding="utf8") as handle:
        handle.write("extra\t99\n")
    with pytest.raises(ConfigError, match="word.dic: entry 'extra' has id 99, but the embedding"):
        BiLM.from_elmoformanylangs(model_dir)


def test_weights_of_another_shape_name_the_tensor(tmp_path):
    model_dir = write_random_efml(tmp_path / "model")
    model_json = json.loads((model_dir / "tiny_model.json").read_text())
    model_json["encoder"]["dim"] = 32
    (model_dir / "tiny_model.json").write_text(json.dumps(model_json))
    with pytest.raises(
        WeightFileError, match=r"encoder.pkl: tensor 'forward_layer_0.input_linearity.weight'"
    ):
        BiLM.from_elmoformanylangs(model_dir)


def test_an_lstm_token_embedder_is_refused_by_name(tmp_path):
    model_dir = write_random_efml(tmp_path / "model")
    model_json = json.loads((model_dir / "tiny_model.json").read_text())
    model_json["token_embedder"]["name"] = "lstm"
    (model_dir / "tiny_model.json").write_text(json.dumps(model_json))
    with pytest.raises(ConfigError, match="token_embedder.name is 'lstm'"):
        BiLM.from_elmoformanylangs(model_dir)
