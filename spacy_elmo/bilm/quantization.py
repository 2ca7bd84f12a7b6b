"""Opt-in int8 dynamic quantisation of the biLM's matrix products (inference only).

Weights are quantised per tensor to int8 once; activations are quantised on the fly. The float32
parameters stay in place (and in `state_dict`), so saving and exporting are unaffected.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn


def int8_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Module:
    """A dynamically quantised `y = x @ weight.T + bias`; weight (out, in), bias (out,) or None."""
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    with warnings.catch_warnings():  # torch marks eager-mode quantisation as deprecated
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(nn.Sequential(linear), {nn.Linear}, dtype=torch.qint8)[
            0
        ]
