"""The biLM training objective: both directions over packed windows, one shared softmax."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..bilm.lm_head import SoftmaxHead
from ..bilm.lstm import LSTMState
from ..bilm.model import BiLM
from .corpus import CharIdCache, Vocabulary, Windows

LayerStates = list[LSTMState]
"""Per layer (h (2, B, P), c (2, B, H)); direction 0 = forward, 1 = backward."""


class LanguageModelObjective(nn.Module):
    """A `BiLM` plus its `SoftmaxHead`; `forward` returns the summed losses of both directions.

    The token encoder runs once per distinct word type over both directions' windows together
    (`encode_types`), so repeated words cost nothing and its weights are tied across directions.
    """

    def __init__(self, bilm: BiLM, head: SoftmaxHead) -> None:
        super().__init__()
        self.bilm = bilm
        self.head = head

    def forward(
        self,
        char_ids: torch.Tensor,
        targets: torch.Tensor,
        mask: torch.Tensor,
        states: LayerStates,
        dropout: float = 0.0,
        sampled_ids: torch.Tensor | None = None,
        log_expected: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, LayerStates]:
        """Summed next-token cross-entropy of each direction.

        Args:
            char_ids: (2, B, T, C) inputs of the forward and the backward windows.
            targets: (2, B, T) int64 vocabulary ids of the next token in each direction.
            mask: (2, B, T) float, 1 where a target is real, 0 on padding (evaluation only).
            states: initial LSTM states per layer, both directions stacked (carried from the previous
                batch).
            dropout: on each LSTM layer's input and on the top layer's output (training only).
            sampled_ids, log_expected: (S,), (V,) for the sampled softmax; None = full softmax.
        Returns:
            losses (2,): summed over the unmasked positions; the final states (not detached).
        """
        token_vectors = self.bilm.token_encoder.encode_types(char_ids)  # (2, B, T, P)
        batch_size, n_steps = targets.shape[1:]
        layer_outputs, final_states = self.bilm.lstm(token_vectors, [batch_size] * n_steps, states, dropout)
        top = F.dropout(layer_outputs[-1], dropout, self.training) if dropout else layer_outputs[-1]
        top = top.reshape(-1, top.shape[-1])  # (2 * B * T, P): both directions in one softmax product
        flat_targets = targets.reshape(-1)
        if sampled_ids is None or log_expected is None:
            token_losses = self._full_loss_where_real(top, flat_targets, mask.reshape(-1))
        else:
            token_losses = self.head.sampled_loss(top, flat_targets, sampled_ids, log_expected)
        losses = (token_losses.view(2, -1) * mask.reshape(2, -1)).sum(1)
        return losses, final_states

    def _full_loss_where_real(
        self, hidden: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """Full-softmax losses (N,) with the (positions x V) logits computed only where `mask` is set;
        padded positions get 0. Evaluation batches keep every row of the batch, so on a short text
        most positions are padding. hidden (N, P), targets (N,), mask (N,) -> (N,)."""
        real = mask.nonzero().squeeze(1)
        if real.numel() == targets.numel():  # a training batch: nothing to skip
            return self.head.full_loss(hidden, targets)
        real_losses = self.head.full_loss(hidden[real], targets[real])
        return real_losses.new_zeros(targets.shape).index_copy(0, real, real_losses)


def zero_states(bilm: BiLM, batch_size: int) -> LayerStates:
    return bilm.lstm.zero_states(batch_size)


def detach_states(states: LayerStates) -> LayerStates:
    """Truncate backprop at the batch boundary: keep the values, drop the graph."""
    return [(hidden.detach(), cell.detach()) for hidden, cell in states]


def reset_some_rows(states: LayerStates, probability: float) -> LayerStates:
    """Zero each row's carried states (every layer, both directions) with `probability`.

    Stateless inference (the `elmo` component's default) starts every sentence from zero states,
    which a biLM trained only on carried states never sees after its first batch: there its
    perplexity was about 3.5x that of later windows. Rows drawn here start their next window from
    zeros, so training covers that start too. Draws come from torch's CPU generator, which
    checkpoints save, so a resumed run draws the same rows on any device.
    """
    if not probability:
        return states
    hidden = states[0][0]
    keep = (torch.rand(hidden.shape[1]) >= probability).to(hidden.device, hidden.dtype)  # (B,), CPU draw
    keep = keep.view(1, -1, 1)
    return [(layer_hidden * keep, layer_cell * keep) for layer_hidden, layer_cell in states]


def stack_states(states: LayerStates) -> dict[str, torch.Tensor]:
    """-> {"hidden": (2, L, B, P), "cell": (2, L, B, H)} for checkpoints."""
    return {
        "hidden": torch.stack([hidden for hidden, _ in states], dim=1),
        "cell": torch.stack([cell for _, cell in states], dim=1),
    }


def unstack_states(hidden: torch.Tensor, cell: torch.Tensor) -> LayerStates:
    """Inverse of `stack_states`."""
    return list(zip(hidden.unbind(1), cell.unbind(1)))


def batch_tensors(
    windows: Windows, char_cache: CharIdCache, vocabulary: Vocabulary, unroll_steps: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Windows -> char_ids (2, B, T, C), targets (2, B, T), mask (2, B, T) float on `device`.

    Rows shorter than `unroll_steps` + 1 (the end of a finite corpus) are zero-padded and masked.
    """
    char_ids = np.stack(
        [char_cache([row[:-1] for row in rows], unroll_steps) for rows in (windows.forward, windows.backward)]
    )
    targets = np.zeros((2, len(windows.forward), unroll_steps), dtype=np.int64)
    mask = np.zeros((2, len(windows.forward), unroll_steps), dtype=np.float32)
    for direction, rows in enumerate((windows.forward, windows.backward)):
        for row_index, row in enumerate(rows):
            ids = vocabulary.ids(row[1:])
            targets[direction, row_index, : len(ids)] = ids
            mask[direction, row_index, : len(ids)] = 1.0
    return (
        torch.from_numpy(char_ids).to(device),
        torch.from_numpy(targets).to(device),
        torch.from_numpy(mask).to(device),
    )
