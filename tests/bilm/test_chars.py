"""Character ids (BOS/EOS/padding markers, UTF-8 bytes, truncation) against hand-written expectations."""

from __future__ import annotations

import pytest
import torch

from spacy_elmo.bilm import InputError, batch_to_ids

BOW, EOW, PAD = 259, 260, 261


def expected(*middle: int) -> list[int]:
    ids = [BOW, *middle, EOW]
    return ids + [PAD] * (50 - len(ids))


def ids_of(token: str) -> list[int]:
    return batch_to_ids([[token]])[0, 0].tolist()


def test_ascii_word_is_bytes_plus_one_between_word_markers():
    assert ids_of("Hi!") == expected(73, 106, 34)


def test_empty_string_is_a_token_with_only_word_markers():
    assert ids_of("") == expected()


def test_literal_sentence_markers_map_to_boundary_ids():
    assert ids_of("<S>") == expected(257)
    assert ids_of("</S>") == expected(258)
    assert ids_of("<s>") == expected(61, 116, 63)  # only the exact strings are special


def test_multibyte_characters_take_one_slot_per_utf8_byte():
    assert ids_of("é") == expected(0xC3 + 1, 0xA9 + 1)
    assert ids_of("😀") == expected(0xF0 + 1, 0x9F + 1, 0x98 + 1, 0x80 + 1)
    assert ids_of("שלום")[:3] == [BOW, 0xD7 + 1, 0xA9 + 1]


def test_truncation_at_48_bytes_can_cut_a_character_in_half():
    ids = ids_of("a" + "é" * 30)
    assert ids == [BOW, 98] + [0xC3 + 1, 0xA9 + 1] * 23 + [0xC3 + 1, EOW]


def test_long_ascii_token_keeps_its_first_48_bytes():
    assert ids_of("x" * 60) == [BOW] + [ord("x") + 1] * 48 + [EOW]


def test_control_characters_are_plain_bytes():
    assert ids_of("\t\x00") == expected(10, 1)


def test_padding_rows_and_empty_sentences_are_all_zero():
    char_ids = batch_to_ids([["a", "b"], [], ["c"]])
    assert char_ids.shape == (3, 2, 50) and char_ids.dtype == torch.int64
    assert char_ids[1].eq(0).all() and char_ids[2, 1].eq(0).all()
    assert char_ids[2, 0].tolist() == expected(100)


def test_only_empty_sentences_give_zero_length_batch():
    assert batch_to_ids([[], []]).shape == (2, 0, 50)
    assert batch_to_ids([]).shape == (0, 0, 50)


@pytest.mark.parametrize("bad", ["a sentence", None, 3])
def test_non_list_input_is_rejected_with_a_clear_error(bad):
    with pytest.raises(InputError, match="list of sentences"):
        batch_to_ids(bad)


def test_sentence_given_as_a_string_is_rejected():
    with pytest.raises(InputError, match="Sentence 1 is a str"):
        batch_to_ids([["ok"], "not tokenised"])


def test_non_string_token_is_named_by_position():
    with pytest.raises(InputError, match="Token 2 of sentence 0 is a int"):
        batch_to_ids([["a", "b", 7]])
