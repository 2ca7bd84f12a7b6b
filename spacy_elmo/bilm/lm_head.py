"""Softmax heads over a word vocabulary: the biLM's training objective and perplexity.

The vocabulary is sorted by descending frequency (ids 0, 1, 2 = `<S>`, `</S>`, `<UNK>`), which is
what the log-uniform (Zipfian) sampler assumes. One head is shared by both directions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class LogUniformSampler:
    """Draws word ids with P(k) = log((k + 2) / (k + 1)) / log(V + 1), as TensorFlow's sampler.

    Samples are drawn with replacement from its own `torch.Generator`, so the draws can be
    checkpointed and replayed (`get_state` / `set_state`).
    """

    def __init__(self, vocab_size: int, seed: int) -> None:
        self.vocab_size = vocab_size
        ids = torch.arange(vocab_size, dtype=torch.float64)
        self.log_probabilities = (torch.log((ids + 2) / (ids + 1)) / math.log(vocab_size + 1)).log().float()
        self.generator = torch.Generator().manual_seed(seed)

    def sample(self, n_samples: int) -> torch.Tensor:
        """(n_samples,) int64 word ids on the CPU."""
        uniform = torch.rand(n_samples, generator=self.generator, dtype=torch.float64)
        # Inverse CDF of the log-uniform distribution: k = floor(exp(u * log(V + 1))) - 1.
        ids = torch.floor(torch.exp(uniform * math.log(self.vocab_size + 1))).long() - 1
        return ids.clamp_(0, self.vocab_size - 1)

    def get_state(self) -> torch.Tensor:
        return self.generator.get_state()

    def set_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)


class SoftmaxHead(nn.Module):
    """`logits = hidden @ weight.T + bias` over V words; full or sampled cross-entropy.

    bilm-tf's init: weight normal with std 1/sqrt(P), bias 0.
    """

    def __init__(self, vocab_size: int, projection_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, projection_dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(projection_dim))

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    def full_loss(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy over all V words. hidden (N, P), targets (N,) int64 -> losses (N,)."""
        return F.cross_entropy(F.linear(hidden, self.weight, self.bias), targets, reduction="none")

    def sampled_loss(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        sampled_ids: torch.Tensor,
        log_expected: torch.Tensor,
    ) -> torch.Tensor:
        """Sampled-softmax cross-entropy with the importance-sampling correction (Jean et al. 2015).

        The S negatives, drawn with replacement and shared by all N rows, enter with their logits
        minus `log_expected` = log(S Q(k)) (the expected count of word k in the draw); samples equal to
        a row's target are masked out, and the target enters once with its own logit. Then
        `exp(o_y) + sum_s exp(o_s) / (S Q(s))` is an unbiased estimate of the full softmax's partition
        function, so the loss and its gradient approach the full softmax's as S grows.

        Args:
            hidden: (N, P); targets: (N,) int64; sampled_ids: (S,) int64; log_expected: (V,) float.
        Returns:
            losses (N,): one per row.
        """
        true_logits = (hidden * self.weight[targets]).sum(-1) + self.bias[targets]
        sampled_logits = F.linear(hidden, self.weight[sampled_ids], self.bias[sampled_ids])
        sampled_logits = sampled_logits - log_expected[sampled_ids]
        accidental_hits = targets.unsqueeze(1) == sampled_ids.unsqueeze(0)  # (N, S)
        sampled_logits = sampled_logits.masked_fill(accidental_hits, float("-inf"))
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)  # (N, 1 + S)
        return F.cross_entropy(logits, targets.new_zeros(targets.shape[0]), reduction="none")
