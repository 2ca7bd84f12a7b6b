"""The context-independent token encoder: char CNN + highway + projection (spec §3)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import BiLMConfig


class Highway(nn.Module):
    """One highway layer in bilm-tf's convention: `y = t * relu(W_T x + b_T) + (1 - t) * x`.

    `t = sigmoid(W_C x + b_C)` (bilm-tf calls it the "carry" gate although it weights the
    transformed branch). Both maps live in one `Linear(F, 2F)`: transform rows first, then gate
    rows, so a layer costs one matrix product.
    """

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        self.linear = nn.Linear(width, 2 * width)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (N, F) -> (N, F)."""
        transform, gate = self.linear(inputs).split(self.width, dim=-1)
        gate = torch.sigmoid(gate)
        return gate * F.relu(transform) + (1.0 - gate) * inputs


class CharCNNTokenEncoder(nn.Module):
    """Char ids (N, C) -> token vectors (N, P): embedding, convolutions, max-pool, highway, projection.

    The embedding table has `n_characters - 1 = 261` learned rows for ids 1..261; id 0 (padding)
    always maps to a zero vector, so the parameter count equals the published layout's.
    """

    def __init__(self, config: BiLMConfig) -> None:
        super().__init__()
        self.config = config
        self.char_embedding = nn.Parameter(torch.empty(261, config.char_embedding_dim))
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, n_filters, kernel_size=width)
            for width, n_filters in config.filters
        )
        self.highways = nn.ModuleList(Highway(config.n_filters) for _ in range(config.n_highway))
        self.projection = nn.Linear(config.n_filters, config.projection_dim)
        self.activation = torch.tanh if config.activation == "tanh" else F.relu

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (N, C) int64, shifted ids (0 = padding) -> (N, P) token vectors."""
        table = F.pad(self.char_embedding, (0, 0, 1, 0))  # row 0 = padding, all zeros
        embedded = F.embedding(char_ids, table).transpose(1, 2)  # (N, d_char, C)
        pooled = [self.activation(convolution(embedded).amax(dim=-1)) for convolution in self.convolutions]
        hidden = torch.cat(pooled, dim=-1)  # (N, F)
        for highway in self.highways:
            hidden = highway(hidden)
        return self.projection(hidden)

    def encode_types(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Encode (..., C) char ids, running the CNN once per distinct row (word type).

        Returns (..., P). Repeated words in a batch cost nothing extra; gradients flow back to
        every occurrence through the gather.
        """
        flat = char_ids.reshape(-1, char_ids.shape[-1])
        unique_ids, inverse = torch.unique(flat, dim=0, return_inverse=True)
        encoded = self(unique_ids)
        return encoded[inverse].reshape(*char_ids.shape[:-1], encoded.shape[-1])
