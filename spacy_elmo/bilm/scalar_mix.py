"""The ELMo scalar mix: `gamma * sum_j softmax(w)_j * layer_j`."""

from __future__ import annotations

import torch
from torch import nn

LAYER_NORM_EPS = 1e-13  # AllenNLP's tiny_value_of_dtype(float32)


class ScalarMix(nn.Module):
    """A task-specific weighted sum of the biLM layers (the paper's `ELMo_task`).

    `w` starts at 0 (equal weights) and `gamma` at 1. With `do_layer_norm`, each layer is first
    standardised with one mean and one variance over all unmasked elements of the whole batch
    (AllenNLP's batch-global "layer norm", not a per-token LayerNorm).
    """

    def __init__(self, n_layers: int, *, do_layer_norm: bool = False, trainable: bool = True) -> None:
        super().__init__()
        self.do_layer_norm = do_layer_norm
        self.weights = nn.Parameter(torch.zeros(n_layers), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(()), requires_grad=trainable)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """layers (L + 1, ..., D), mask (...) bool (needed for layer norm) -> (..., D)."""
        if layers.shape[0] != self.weights.shape[0]:
            raise ValueError(
                f"ScalarMix was built for {self.weights.shape[0]} layers but got {layers.shape[0]}."
            )
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("ScalarMix(do_layer_norm=True) needs the token mask.")
            layers = self._normalise(layers, mask)
        normalised_weights = torch.softmax(self.weights, dim=0)
        mixed = torch.tensordot(normalised_weights, layers, dims=([0], [0]))
        return self.gamma * mixed

    @staticmethod
    def _normalise(layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Standardise each layer with its batch-global mean/variance over unmasked elements."""
        broadcast_mask = mask.unsqueeze(-1).to(layers.dtype)  # (..., 1)
        n_elements = broadcast_mask.sum() * layers.shape[-1]
        reduce_dims = tuple(range(1, layers.dim()))
        masked = layers * broadcast_mask
        mean = masked.sum(dim=reduce_dims, keepdim=True) / n_elements
        variance = (((masked - mean) * broadcast_mask) ** 2).sum(dim=reduce_dims, keepdim=True) / n_elements
        return (layers - mean) / torch.sqrt(variance + LAYER_NORM_EPS)

    def l2_penalty(self, coefficient: float) -> torch.Tensor:
        """`coefficient * ||w||^2`, the paper's lambda regulariser on the layer weights."""
        return coefficient * (self.weights**2).sum()
