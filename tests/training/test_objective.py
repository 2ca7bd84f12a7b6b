"""Carried LSTM states between training batches, and perplexity from zero states."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from spacy_elmo.bilm import BiLM, BiLMConfig
from spacy_elmo.bilm.chars import BOS_TOKEN, EOS_TOKEN, batch_to_ids
from spacy_elmo.bilm.lm_head import SoftmaxHead
from spacy_elmo.training import (
    load_language_model,
    load_pretrain_config,
    perplexity,
    pretrain,
    sentence_perplexity,
)
from spacy_elmo.training.corpus import DocumentReader, SentenceSplitter, read_sentences
from spacy_elmo.training.objective import LanguageModelObjective, reset_some_rows, zero_states

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


class EveryPositionObjective(LanguageModelObjective):
    """The unoptimised computation: full-softmax losses at every position, padding masked after."""

    def _full_loss_where_real(
        self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        return self.head.full_loss(hidden, targets)


def test_full_softmax_skips_padding_and_gives_the_losses_and_gradients_of_every_position():
    """The full softmax computes logits only where the mask is set: losses and every parameter's
    gradient as when every position is scored and the padding masked afterwards, to 1e-6."""
    torch.manual_seed(0)
    config = BiLMConfig(lstm_dim=16, projection_dim=8, filters=((1, 8), (2, 8)), n_highway=1)
    skipping = LanguageModelObjective(BiLM(config), SoftmaxHead(vocab_size=40, projection_dim=8))
    every_position = EveryPositionObjective(skipping.bilm, skipping.head)  # the same weights
    batch_size, n_steps = 3, 5
    words = [["the", "cat", "sat", "on", "a"], ["mat", "."], ["dogs", "bark", "loudly"]]
    char_ids = torch.stack([batch_to_ids(words), batch_to_ids(words)])  # (2, B, T, C)
    targets = torch.randint(0, 40, (2, batch_size, n_steps))
    mask = torch.zeros(2, batch_size, n_steps)
    for row, sentence in enumerate(words):
        mask[:, row, : len(sentence)] = 1.0
    assert 0 < int(mask.sum()) < mask.numel()

    def losses_and_gradients(
        objective: LanguageModelObjective,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        objective.zero_grad(set_to_none=True)
        losses, _ = objective(char_ids, targets, mask, zero_states(objective.bilm, batch_size))
        losses.sum().backward()
        return losses.detach(), {
            name: parameter.grad.clone() for name, parameter in objective.named_parameters()
        }

    got_losses, got_gradients = losses_and_gradients(skipping)
    want_losses, want_gradients = losses_and_gradients(every_position)
    assert torch.allclose(got_losses, want_losses, rtol=1e-6, atol=0)
    assert got_gradients.keys() == want_gradients.keys()
    for name, want in want_gradients.items():
        assert torch.allclose(got_gradients[name], want, rtol=1e-6, atol=1e-7), name


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


def hand_sentence_losses(objective, vocabulary, sentence: list[str]) -> tuple[torch.Tensor, int]:
    """Summed forward and backward cross-entropy (2,) of one sentence, float64, by another route:
    `BiLM.forward` with its boundaries (the component's path, one sentence, zero states), then the
    head's logits and log-softmax written out."""
    projection_dim = objective.bilm.config.projection_dim
    layers, _ = objective.bilm(batch_to_ids([sentence]), keep_sentence_boundaries=True)  # (L+1, 1, n+2, 2P)
    top = layers[-1, 0].double()
    weight, bias = objective.head.weight.double(), objective.head.bias.double()
    ids = torch.tensor(vocabulary.ids([BOS_TOKEN, *sentence, EOS_TOKEN]))
    n_targets = len(sentence) + 1
    forward = torch.log_softmax(top[:-1, :projection_dim] @ weight.T + bias, dim=-1)  # <S> w1..wn -> w1..</S>
    backward = torch.log_softmax(top[1:, projection_dim:] @ weight.T + bias, dim=-1)  # w1..</S> -> <S>..wn
    positions = torch.arange(n_targets)
    losses = torch.stack([-forward[positions, ids[1:]].sum(), -backward[positions, ids[:-1]].sum()])
    return losses, n_targets


def test_sentence_perplexity_scores_every_sentence_alone_as_the_component_runs_the_bilm(
    tiny_run, tiny_corpus
):
    objective, vocabulary = load_language_model(tiny_run[0])
    sentences = read_sentences(DocumentReader([tiny_corpus[1]], "line"), SentenceSplitter("en"), max_tokens=0)
    sentences = sentences[:23]
    assert len({len(sentence) for sentence in sentences}) > 3  # batches mix lengths: padding is masked
    objective.eval()
    with torch.no_grad():
        per_sentence = [hand_sentence_losses(objective, vocabulary, sentence) for sentence in sentences]
    totals = torch.stack([losses for losses, _ in per_sentence]).sum(0)
    n_tokens = sum(count for _, count in per_sentence)
    expected = torch.exp(totals / n_tokens).tolist()
    longest = max(len(sentence) for sentence in sentences) + 1
    for batch_positions in (1, 5 * longest, 10_000):  # one sentence per batch, a few, all of them
        scores = sentence_perplexity(objective, sentences, vocabulary, batch_positions=batch_positions)
        assert scores["tokens"] == n_tokens
        assert scores["forward"] == pytest.approx(expected[0], rel=1e-5)
        assert scores["backward"] == pytest.approx(expected[1], rel=1e-5)
        assert scores["perplexity"] == pytest.approx((expected[0] * expected[1]) ** 0.5, rel=1e-5)
    stateful = perplexity(objective, sentences, vocabulary, batch_size=5, unroll_steps=10)
    assert stateful["perplexity"] != pytest.approx(scores["perplexity"], rel=1e-3)  # a different measure


def test_evaluation_gives_back_the_training_mode_even_when_it_fails(tiny_run, monkeypatch):
    objective, vocabulary = load_language_model(tiny_run[0])
    objective.train()
    sentence_perplexity(objective, [["a", "short", "sentence"]], vocabulary)
    assert objective.training

    def broken(*args, **kwargs):
        assert not objective.training, "evaluation must run without dropout"
        raise RuntimeError("broken encoder")

    monkeypatch.setattr(objective.bilm.token_encoder, "encode_types", broken)
    for evaluate in (perplexity, sentence_perplexity):
        with pytest.raises(RuntimeError, match="broken encoder"):
            evaluate(objective, [["a", "short", "sentence"]], vocabulary)
        assert objective.training, evaluate.__name__
