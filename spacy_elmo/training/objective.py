"""The biLM training objective: both directions over packed windows, one shared softmax (spec §9)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..bilm.lm_head import SoftmaxHead
from ..bilm.lstm import LSTMState
from ..bilm.model import BiLM
from .corpus import CharIdCache, Vocabulary, Windows

DirectionStates = list[list[LSTMState]]
"""[direction][layer] -> (h (B, P), c (B, H)); direction 0 = forward, 1 = backward."""


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
        states: DirectionStates,
        dropout: float = 0.0,
        sampled_ids: torch.Tensor | None = None,
        log_expected: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, DirectionStates]:
        """Summed next-token cross-entropy of each direction.

        Args:
            char_ids: (2, B, T, C) inputs of the forward and the backward windows.
            targets: (2, B, T) int64 vocabulary ids of the next token in each direction.
            mask: (2, B, T) float, 1 where a target is real, 0 on padding (evaluation only).
            states: initial LSTM states per direction and layer (carried from the previous batch).
            dropout: on each LSTM layer's input and on the top layer's output (training only).
            sampled_ids, log_expected: (S,), (V,) for the sampled softmax; None = full softmax.
        Returns:
            losses (2,): summed over the unmasked positions; the final states (not detached).
        """
        token_vectors = self.bilm.token_encoder.encode_types(char_ids)  # (2, B, T, P)
        batch_size, n_steps = targets.shape[1:]
        batch_sizes = [batch_size] * n_steps
        losses = []
        final_states: DirectionStates = []
        for direction, stack in enumerate((self.bilm.forward_lstm, self.bilm.backward_lstm)):
            layer_outputs, final = stack(token_vectors[direction], batch_sizes, states[direction], dropout)
            top = F.dropout(layer_outputs[-1], dropout, self.training) if dropout else layer_outputs[-1]
            top = top.reshape(-1, top.shape[-1])
            direction_targets = targets[direction].reshape(-1)
            if sampled_ids is None or log_expected is None:
                token_losses = self.head.full_loss(top, direction_targets)
            else:
                token_losses = self.head.sampled_loss(top, direction_targets, sampled_ids, log_expected)
            losses.append((token_losses * mask[direction].reshape(-1)).sum())
            final_states.append(final)
        return torch.stack(losses), final_states


def zero_states(bilm: BiLM, batch_size: int) -> DirectionStates:
    return [bilm.forward_lstm.zero_states(batch_size), bilm.backward_lstm.zero_states(batch_size)]


def detach_states(states: DirectionStates) -> DirectionStates:
    """Truncate backprop at the batch boundary: keep the values, drop the graph."""
    return [[(hidden.detach(), cell.detach()) for hidden, cell in direction] for direction in states]


def stack_states(states: DirectionStates) -> dict[str, torch.Tensor]:
    """-> {"hidden": (2, L, B, P), "cell": (2, L, B, H)} for checkpoints."""
    return {
        "hidden": torch.stack([torch.stack([h for h, _ in direction]) for direction in states]),
        "cell": torch.stack([torch.stack([c for _, c in direction]) for direction in states]),
    }


def unstack_states(hidden: torch.Tensor, cell: torch.Tensor) -> DirectionStates:
    """Inverse of `stack_states`."""
    return [[(hidden[d, layer], cell[d, layer]) for layer in range(hidden.shape[1])] for d in range(2)]


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
