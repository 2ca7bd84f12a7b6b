"""Held-out perplexity, full softmax: as bilm-tf reports it, and sentence by sentence.

`perplexity` is stateful over the text, as bilm-tf evaluates. `sentence_perplexity` scores every
sentence on its own from zero LSTM states, the way the `elmo` component runs the biLM.
Forward and backward perplexities are exp(mean cross-entropy per token) of each direction; the
reported `perplexity` is exp of their average, i.e. their geometric mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ..bilm.batching import budget_batches
from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from ..bilm.errors import ConfigError, WeightFileError
from ..bilm.io.model_dir import HEAD_FILE, VOCAB_FILE, has_softmax_head, read_softmax_head
from ..bilm.lm_head import SoftmaxHead
from ..bilm.model import BiLM
from .corpus import CharIdCache, ListSentences, Vocabulary, WindowBatcher, Windows
from .objective import LanguageModelObjective, batch_tensors, detach_states, zero_states


@torch.no_grad()
def perplexity(
    objective: LanguageModelObjective,
    sentences: list[list[str]],
    vocabulary: Vocabulary,
    *,
    batch_size: int = 64,
    unroll_steps: int = 20,
) -> dict[str, float]:
    """{"forward": ppl, "backward": ppl, "perplexity": geometric mean, "tokens": n} over `sentences`.

    Also "cold_forward", "cold_backward" and "cold_tokens": the same over the first batch only,
    where every row starts from zero LSTM states, as stateless inference starts every sentence.
    """
    if batch_size < 1 or unroll_steps < 1:
        raise ConfigError(
            f"Perplexity needs at least 1 row and 1 step per batch: batch_size is {batch_size}, "
            f"unroll_steps is {unroll_steps}."
        )
    device = objective.head.weight.device
    batcher = WindowBatcher(ListSentences(sentences), batch_size, unroll_steps)
    char_cache = CharIdCache(objective.bilm.config.max_characters_per_token)
    states = zero_states(objective.bilm, batch_size)
    totals = torch.zeros(2, dtype=torch.float64)
    n_tokens = 0
    cold_losses: list[float] = [math.nan, math.nan]
    cold_tokens = 0
    with _eval_mode(objective):
        while (windows := batcher.next_batch()) is not None:
            char_ids, targets, mask = batch_tensors(windows, char_cache, vocabulary, unroll_steps, device)
            losses, states = objective(char_ids, targets, mask, states)
            states = detach_states(states)
            batch_losses = losses.double().cpu()
            if n_tokens == 0:
                cold_losses, cold_tokens = (batch_losses / windows.n_tokens).tolist(), windows.n_tokens
            totals += batch_losses
            n_tokens += windows.n_tokens
    return {
        **_direction_perplexities(totals, n_tokens),
        "cold_forward": math.exp(cold_losses[0]),
        "cold_backward": math.exp(cold_losses[1]),
        "cold_tokens": cold_tokens,
    }


@torch.no_grad()
def sentence_perplexity(
    objective: LanguageModelObjective,
    sentences: list[list[str]],
    vocabulary: Vocabulary,
    *,
    batch_positions: int = 1280,
) -> dict[str, float]:
    """{"forward", "backward", "perplexity", "tokens"}, every sentence scored alone from zero states.

    This is how the `elmo` component runs the biLM. Each direction reads `<S>` w1 … wn (the
    backward one `</S>` wn … w1) and predicts the n words and the closing boundary: n + 1 tokens
    per sentence, where the stateful count also has the `</S>` -> `<S>` step between sentences.
    Sentences are batched by length, at most `batch_positions` rows x steps per batch (the full
    softmax's logits are (2, rows, steps, V)); padded positions are masked.
    """
    device = objective.head.weight.device
    char_cache = CharIdCache(objective.bilm.config.max_characters_per_token)
    totals = torch.zeros(2, dtype=torch.float64)
    n_tokens = 0
    with _eval_mode(objective):
        n_steps = [len(sentence) + 1 for sentence in sentences]
        for batch_indices in budget_batches(n_steps, batch_positions, order="shortest_first"):
            batch = [sentences[index] for index in batch_indices]
            wrapped = [[BOS_TOKEN, *sentence, EOS_TOKEN] for sentence in batch]
            windows = Windows(
                forward=wrapped,
                backward=[row[::-1] for row in wrapped],
                n_tokens=sum(len(sentence) + 1 for sentence in batch),
            )
            n_steps = max(len(row) for row in wrapped) - 1
            char_ids, targets, mask = batch_tensors(windows, char_cache, vocabulary, n_steps, device)
            losses, _ = objective(char_ids, targets, mask, zero_states(objective.bilm, len(batch)))
            totals += losses.double().cpu()
            n_tokens += windows.n_tokens
    return _direction_perplexities(totals, n_tokens)


@contextmanager
def _eval_mode(objective: LanguageModelObjective) -> Iterator[None]:
    """No dropout inside the block; the objective's training mode comes back even on an error."""
    was_training = objective.training
    objective.eval()
    try:
        yield
    finally:
        objective.train(was_training)


def _direction_perplexities(totals: torch.Tensor, n_tokens: int) -> dict[str, float]:
    """Summed losses (2,) of the forward and backward direction over `n_tokens` -> perplexities."""
    mean_losses = (totals / n_tokens).tolist() if n_tokens else [math.nan, math.nan]
    return {
        "forward": math.exp(mean_losses[0]),
        "backward": math.exp(mean_losses[1]),
        "perplexity": math.exp(sum(mean_losses) / 2),
        "tokens": n_tokens,
    }


def load_softmax_head(model_dir: Path, bilm: BiLM) -> tuple[SoftmaxHead, Vocabulary] | None:
    """The softmax head and vocabulary saved beside a biLM by `pretrain`, or None if there are none."""
    if not has_softmax_head(model_dir):
        return None
    vocabulary = Vocabulary.load(model_dir / VOCAB_FILE)
    tensors = read_softmax_head(model_dir, len(vocabulary), bilm.config.projection_dim)
    head = SoftmaxHead(len(vocabulary), bilm.config.projection_dim)
    head.load_state_dict(tensors)
    return head, vocabulary


def load_language_model(model_dir: Path) -> tuple[LanguageModelObjective, Vocabulary]:
    """A model directory written by `pretrain`: the biLM, `lm_head.safetensors` and `vocab.txt`."""
    bilm = BiLM.load(model_dir)
    head_and_vocabulary = load_softmax_head(model_dir, bilm)
    if head_and_vocabulary is None:
        raise WeightFileError(
            f"{model_dir} has no {HEAD_FILE} and {VOCAB_FILE}: perplexity needs the softmax head that "
            "`spacy-elmo pretrain` writes. Models imported from AllenNLP carry none; fine-tune them first."
        )
    head, vocabulary = head_and_vocabulary
    return LanguageModelObjective(bilm, head), vocabulary
