"""Carried LSTM states between training batches, and perplexity from zero states."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from spacy_elmo.training import load_language_model, load_pretrain_config, perplexity, pretrain
from spacy_elmo.training.corpus import DocumentReader, SentenceSplitter, read_sentences
from spacy_elmo.training.objective import reset_some_rows

from .conftest import TINY_CONFIG, tiny_overrides


def carried_states(batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Two layers of (h (2, B, 3), c (2, B, 5)), no value zero."""
    return [(torch.rand(2, batch_size, 3) + 1, torch.rand(2, batch_size, 5) + 1) for _ in range(2)]


def test_reset_zeroes_whole_rows_across_layers_and_directions_at_the_given_rate():
    states = carried_states(4000)
    torch.manual_seed(0)
    reset = reset_some_rows(states, 0.25)
    parts = [part for layer in reset for part in layer]  # h and c of both layers
    zeroed = torch.stack([(part == 0).all(2).all(0) for part in parts])  # (4, B): row all zeros there
    assert (zeroed == zeroed[0]).all(), "a row is reset in every layer, direction, h and c, or in none"
    assert 900 < int(zeroed[0].sum()) < 1100  # 1000 expected (binomial sd ~27)
    kept = ~zeroed[0]
    for part, old_part in zip(parts, [part for layer in states for part in layer]):
        assert torch.equal(part[:, kept], old_part[:, kept])


def test_reset_probability_zero_draws_nothing_and_one_zeroes_every_row():
    states = carried_states(8)
    torch.manual_seed(0)
    assert reset_some_rows(states, 0.0) is states
    after = torch.rand(1)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(1))  # no draw: runs without resets keep their dropout masks
    assert all(not hidden.any() and not cell.any() for hidden, cell in reset_some_rows(states, 1.0))


def test_pretraining_applies_the_state_reset_probability(tiny_corpus, tmp_path):
    weights = []
    for probability in (0.0, 1.0):
        overrides = tiny_overrides(
            tiny_corpus, max_steps=5, eval_every=0, state_reset_probability=probability
        )
        pretrain(load_pretrain_config(TINY_CONFIG, overrides), tmp_path / str(probability))
        weights.append(load_file(str(tmp_path / str(probability) / "model.safetensors")))
    changed = [name for name in weights[0] if not torch.equal(weights[0][name], weights[1][name])]
    assert any("lstm" in name for name in changed), "resetting every row every batch changed no LSTM weight"


def test_perplexity_reports_the_zero_state_first_batch_apart(tiny_run, tiny_corpus):
    objective, vocabulary = load_language_model(tiny_run[0])
    sentences = read_sentences(DocumentReader([tiny_corpus[1]], "line"), SentenceSplitter("en"), max_tokens=0)
    scores = perplexity(objective, sentences, vocabulary, batch_size=8, unroll_steps=10)
    assert scores["cold_tokens"] == 8 * 10 < scores["tokens"]
    n_tokens = sum(len(sentence) + 2 for sentence in sentences)  # with <S> and </S>
    one_batch = perplexity(objective, sentences, vocabulary, batch_size=8, unroll_steps=n_tokens)
    assert one_batch["cold_tokens"] == one_batch["tokens"]  # a row can hold the whole text
    for direction in ("forward", "backward"):
        assert one_batch[f"cold_{direction}"] == pytest.approx(one_batch[direction])
