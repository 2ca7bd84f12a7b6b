"""The ELMo scalar mix: `gamma * sum_j softmax(w)_j * layer_j`, the one implementation of it.

`ScalarMix` is the trainable, task-specific mix (the paper's `ELMo_task`): the spaCy listeners run
it through a Thinc wrapper. `mix_layers` is its arithmetic on given weights, which the fixed mix
of `doc._.elmo` / `token._.elmo` also uses.
"""

from __future__ import annotations

import torch
from torch import nn

LAYER_NORM_EPS = 1e-13  # AllenNLP's tiny_value_of_dtype(float32)


def mix_layers(layers: torch.Tensor, weights: torch.Tensor, gamma: torch.Tensor | float) -> torch.Tensor:
    """layers (L + 1, ..., D), weights (L + 1,) that sum to 1, gamma (1,) or a float -> (..., D).

    gamma scales the L + 1 weights rather than the (..., D) sum: one pass over the layers forward
    and one backward, where scaling the sum takes two more.
    """
    return torch.tensordot(gamma * weights, layers, dims=([0], [0]))


class _AddL2Gradient(torch.autograd.Function):
    """Identity on the layer weights whose backward adds `2 * coefficient * w`: the gradient of
    the paper's L2 penalty `coefficient * ||w||^2`, without a term in the caller's loss."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, weights: torch.Tensor, coefficient: float):  # type: ignore[override]
        ctx.save_for_backward(weights)
        ctx.coefficient = coefficient  # type: ignore[attr-defined]
        return weights.view_as(weights)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, d_weights: torch.Tensor):  # type: ignore[override]
        (weights,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return d_weights + 2.0 * ctx.coefficient * weights, None  # type: ignore[attr-defined]


class ScalarMix(nn.Module):
    """A task-specific weighted sum of the biLM layers (the paper's `ELMo_task`).

    `w` starts at 0 (equal weights) and `gamma` at 1. With `do_layer_norm`, each layer is first
    standardised with one mean and one variance over all unmasked elements of the whole batch
    (AllenNLP's batch-global "layer norm", not a per-token LayerNorm). In training mode, `dropout`
    drops elements of the mixed vectors, and `l2_coefficient` adds the gradient of
    `l2_coefficient * ||w||^2` to `w` in every backward pass (the paper's lambda).
    """

    def __init__(
        self,
        n_layers: int,
        *,
        do_layer_norm: bool = False,
        trainable: bool = True,
        dropout: float = 0.0,
        l2_coefficient: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0 <= dropout < 1 or l2_coefficient < 0:
            raise ValueError(f"ScalarMix needs 0 <= dropout < 1 ({dropout}) and l2_coefficient >= 0.")
        self.do_layer_norm = do_layer_norm
        self.dropout = dropout
        self.l2_coefficient = l2_coefficient
        self.weights = nn.Parameter(torch.zeros(n_layers), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(1), requires_grad=trainable)  # (1,), as in AllenNLP

    @property
    def n_layers(self) -> int:
        return self.weights.shape[0]

    def normalised_weights(self) -> torch.Tensor:
        """softmax(w), (L + 1,): the share of each layer."""
        return torch.softmax(self.weights, dim=0)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """layers (L + 1, ..., D), mask (...) bool (needed for layer norm) -> (..., D)."""
        if layers.shape[0] != self.n_layers:
            raise ValueError(f"ScalarMix was built for {self.n_layers} layers but got {layers.shape[0]}.")
        if self.do_layer_norm:
            if mask is None:
                raise ValueError("ScalarMix(do_layer_norm=True) needs the token mask.")
            layers = self._normalise(layers, mask)
        weights = self.weights
        if self.training and self.l2_coefficient and weights.requires_grad:
            weights = _AddL2Gradient.apply(weights, self.l2_coefficient)
        mixed = mix_layers(layers, torch.softmax(weights, dim=0), self.gamma)
        if self.training and self.dropout:
            mixed = nn.functional.dropout(mixed, self.dropout)
        return mixed

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

    def l2_penalty(self, coefficient: float | None = None) -> torch.Tensor:
        """`coefficient * ||w||^2` (default: `l2_coefficient`), to add to a loss by hand or to
        report; with `l2_coefficient` set, training mode already adds its gradient."""
        return (self.l2_coefficient if coefficient is None else coefficient) * (self.weights**2).sum()
