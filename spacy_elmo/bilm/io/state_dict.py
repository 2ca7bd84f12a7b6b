"""The tensor shapes a config gives, and the check of loaded tensors against them.

Modules are built on the meta device to read their state-dict shapes: no memory is allocated and
no random initialisation runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..errors import WeightFileError
from ..lm_head import SoftmaxHead

StateDictShapes = dict[str, tuple[int, ...]]


def state_dict_shapes(build_module: Callable[[], nn.Module]) -> StateDictShapes:
    """The shape of every state-dict tensor of the module `build_module` returns (built on meta)."""
    with torch.device("meta"):
        module = build_module()
    return {name: tuple(tensor.shape) for name, tensor in module.state_dict().items()}


def softmax_head_state_dict_shapes(vocab_size: int, projection_dim: int) -> StateDictShapes:
    """The shapes of a `SoftmaxHead`'s state dict: weight (V, P) and bias (V,)."""
    return state_dict_shapes(lambda: SoftmaxHead(vocab_size, projection_dim))


def check_finite(tensor: torch.Tensor, name: str, source: str) -> None:
    """Raise `WeightFileError` if a floating-point tensor holds NaN or infinite values, which
    would turn every output they reach into NaN without an error."""
    if tensor.is_floating_point():
        n_bad = int((~torch.isfinite(tensor)).sum())
        if n_bad:
            raise WeightFileError(
                f"{source}: tensor {name!r} holds {n_bad:,} NaN or infinite value(s): the file is "
                "damaged, or training diverged. Use another copy of the model, or an earlier checkpoint."
            )


def check_state_dict(
    tensors: dict[str, torch.Tensor], expected: StateDictShapes, source: str, described_by: str = "the config"
) -> None:
    """Raise `WeightFileError` naming the first missing, unexpected, wrongly shaped or not finite
    tensor; `described_by` names what gives the expected shapes."""
    for name, shape in expected.items():
        if name not in tensors:
            raise WeightFileError(
                f"{source} has no tensor {name!r}, which {described_by} requires; the file is "
                "incomplete or from another model."
            )
        if tuple(tensors[name].shape) != shape:
            raise WeightFileError(
                f"{source}: tensor {name!r} has shape {tuple(tensors[name].shape)}, {described_by} "
                f"expects {shape}. They do not belong together."
            )
        check_finite(tensors[name], name, source)
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise WeightFileError(
            f"{source} has tensor {unexpected[0]!r} that {described_by} does not describe "
            f"({len(unexpected)} unexpected in all)."
        )
