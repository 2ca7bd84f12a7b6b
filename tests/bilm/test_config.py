"""BiLMConfig: presets, AllenNLP options round trip, clear errors."""

from __future__ import annotations

import json

import pytest

from spacy_elmo.bilm import PRESETS, BiLM, BiLMConfig, ConfigError


@pytest.mark.parametrize(
    "name, count",
    [("small", 13_593_296), ("medium", 28_027_728), ("original", 93_600_848), ("original-5.5b", 93_600_848)],
)
def test_published_parameter_counts(name, count):
    bilm = BiLM(BiLMConfig.preset(name))
    assert sum(parameter.numel() for parameter in bilm.parameters()) == count


def test_preset_output_dims():
    assert [PRESETS[name].output_dim for name in ("small", "medium", "original")] == [256, 512, 1024]


def test_fixture_options_round_trip(shared_data):
    options = json.loads((shared_data / "bilm-tf-fixture" / "options.json").read_text())
    config = BiLMConfig.from_allennlp_options(options)
    assert config.lstm_dim == 64 and config.projection_dim == 16 and not config.use_skip_connections
    assert config.filters == ((1, 4), (2, 8), (3, 16), (4, 32), (5, 64)) and config.n_filters == 124
    assert config.to_allennlp_options() == options


def test_bilm_tf_training_fields_are_kept():
    options = PRESETS["small"].to_allennlp_options() | {"n_epochs": 10, "unroll_steps": 20}
    assert BiLMConfig.from_allennlp_options(options).to_allennlp_options() == options


def test_options_file_round_trip(tmp_path):
    PRESETS["original"].to_options_file(tmp_path / "options.json")
    assert BiLMConfig.from_options_file(tmp_path / "options.json") == PRESETS["original"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda o: o["lstm"].pop("projection_dim"), "missing field 'lstm.projection_dim'"),
        (lambda o: o["char_cnn"]["embedding"].pop("dim"), "missing field 'embedding.dim'"),
        (lambda o: o.pop("char_cnn"), "missing field 'char_cnn'"),
        (lambda o: o["lstm"].update(peepholes=True), "unknown field 'lstm.peepholes'"),
        (lambda o: o.update(vocab="x.txt"), "unknown field 'vocab'"),
        (lambda o: o["char_cnn"].update(activation="gelu"), "activation is 'gelu'"),
        (lambda o: o["char_cnn"].update(n_characters=300), "n_characters is 300"),
        (lambda o: o["char_cnn"].update(filters=[[1, 2, 3]]), "filters must be a list"),
        (lambda o: o["lstm"].update(dim=0), "lstm_dim is 0"),
    ],
)
def test_bad_options_name_the_field(edit, message):
    options = PRESETS["small"].to_allennlp_options()
    edit(options)
    with pytest.raises(ConfigError, match=message):
        BiLMConfig.from_allennlp_options(options, source="opts.json")


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match="small, medium, original"):
        BiLMConfig.preset("large")


def test_unreadable_options_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        BiLMConfig.from_options_file(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        BiLMConfig.from_options_file(tmp_path / "bad.json")


def test_a_lexicon_config_round_trips_and_byte_options_stay_as_they_were():
    lexicon_config = PRESETS["original"].replace(
        char_vocabulary="lexicon", n_characters=5001, word_dim=100, n_words=70_000, char_embedding_dim=50
    )
    options = lexicon_config.to_allennlp_options()
    assert options["char_cnn"]["vocabulary"] == "lexicon" and options["word_embedding"] == {
        "dim": 100,
        "n_words": 70_000,
    }
    assert BiLMConfig.from_allennlp_options(options) == lexicon_config
    assert lexicon_config.token_features == 2148 and lexicon_config.char_embedding_rows == 5000
    assert "vocabulary" not in PRESETS["original"].to_allennlp_options()["char_cnn"]
    assert "word_embedding" not in PRESETS["original"].to_allennlp_options()


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"char_vocabulary": "words"}, "char_cnn.vocabulary is 'words'"),
        ({"word_dim": 100, "n_words": 10}, "word_embedding needs char_cnn.vocabulary 'lexicon'"),
        ({"char_vocabulary": "lexicon", "n_characters": 300, "word_dim": 100}, "give both"),
        ({"char_vocabulary": "lexicon", "n_characters": 1}, "n_characters is 1"),
    ],
)
def test_bad_vocabulary_settings_name_the_field(changes, message):
    with pytest.raises(ConfigError, match=message):
        PRESETS["small"].replace(**changes)
