"""How the biLM's matrix products run: exact float32, bfloat16 or int8.

This is the one seam between the modules and the reduced-precision kernels. A module keeps its
float32 parameters (they are what training updates and what files hold) and, once a reduced
precision is set, a `ReducedProduct` per weight, which makes its bfloat16 or int8 copy on first
use and again whenever a parameter it was made from changes. Everything around the products
(biases, gates, cell state, clipping, pooling) stays in float32.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import nn

from .errors import InputError

Precision = Literal["fp32", "bf16", "int8"]
PRECISION_CHOICES = ("fp32", "bf16", "int8", "auto")
"""What `BiLM.set_precision` and the component's `precision` setting accept."""

WeightSource = Callable[[], tuple[torch.Tensor, torch.Tensor | None]]
"""Returns a product's float32 weight (..., K, O) and bias (..., O) or None, from the parameters."""


def bf16_products_supported(device: torch.device) -> bool:
    """True where bfloat16 matrix products run on hardware units: a CUDA device that supports
    bf16, or a CPU that oneDNN runs bf16 on natively (AVX-512 bf16 or AMX)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def has_bf16_matrix_units(device: torch.device) -> bool:
    """True where bf16 products beat int8 ones: a CUDA device with bf16, or a CPU with AMX tiles.

    A CPU with AVX-512 bf16 dot products but no AMX (an AMD EPYC we measured) runs bf16, but its
    int8 VNNI products read half the bytes: int8 was 2.2x faster at batch 1 there and as fast at
    batch 64 (docs/speed.md).
    """
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    amx_check = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return device.type == "cpu" and amx_check is not None and bool(amx_check())


def resolve_precision(requested: str, device: torch.device) -> Precision:
    """Check a precision name and turn "auto" into the fastest reduced mode for `device`.

    "auto" is bf16 on a CUDA device or a CPU with bf16 matrix units (AMX), int8 on other CPUs,
    fp32 on a CUDA device without bf16. bf16 on a CPU with no bf16 instructions at all runs
    (emulated) with a warning that it is slower than fp32; int8 is CPU only.
    """
    if requested not in PRECISION_CHOICES:
        raise InputError(f"precision is {requested!r}: use one of {', '.join(PRECISION_CHOICES)}.")
    if requested == "auto":
        if has_bf16_matrix_units(device):
            return "bf16"
        return "int8" if device.type == "cpu" else "fp32"
    if requested == "int8" and device.type != "cpu":
        raise InputError(
            f"precision 'int8' runs on the CPU only, and this biLM is on {device}: use 'bf16' or 'auto'."
        )
    if requested == "bf16" and not bf16_products_supported(device):
        warnings.warn(
            f"This {device.type.upper()} has no bfloat16 instructions, so precision 'bf16' is emulated "
            "and slower than 'fp32'; 'auto' picks the fastest reduced mode here.",
            stacklevel=3,
        )
    return cast(Precision, requested)


class ReducedProduct:
    """`inputs @ weight + bias` in bfloat16 or int8, for inference.

    Inputs (..., N, K) -> float32 (..., N, O), where the weight is (K, O), or (D, K, O) for a
    product stacked over D directions (then inputs are (D, N, K)). bf16 multiplies bf16 copies
    of the operands and bias with float32 accumulation and rounds the result to bf16. int8
    quantises the weight per tensor (per direction) and the inputs on the fly.
    """

    def __init__(
        self, precision: Precision, source: WeightSource, parameters: Sequence[torch.Tensor]
    ) -> None:
        if precision == "fp32":
            raise ValueError("fp32 products use the parameters directly, not a ReducedProduct.")
        self.precision = precision
        self.source = source
        self.parameters = list(parameters)
        self._signature: tuple[tuple[int, int], ...] = ()
        self._products: list[Callable[[torch.Tensor], torch.Tensor]] = []  # one per direction

    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        """(..., N, K) -> float32 (..., N, O)."""
        return self.native(inputs).float()

    def native(self, inputs: torch.Tensor) -> torch.Tensor:
        """(..., N, K) -> (..., N, O) as the kernel returns it: bf16 for bf16, float32 for int8.

        For callers that reduce or add the result into float32 anyway (a max-pool, a sum of gate
        inputs), which then skip a float32 copy of the whole product.
        """
        self._prepare()
        if inputs.dim() == 1:
            return self._products[0](inputs.unsqueeze(0)).squeeze(0)
        if inputs.dim() == 2:
            return self._products[0](inputs)
        return torch.stack([product(rows) for product, rows in zip(self._products, inputs)])

    def _prepare(self) -> None:
        """Make the reduced copies if there are none or a source parameter has changed."""
        signature = tuple((parameter.data_ptr(), parameter._version) for parameter in self.parameters)
        if signature == self._signature:
            return
        with torch.no_grad():
            weight, bias = self.source()
            weights = weight.unsqueeze(0) if weight.dim() == 2 else weight  # (D, K, O)
            biases = [None] * len(weights) if bias is None else list(bias.reshape(len(weights), -1))
            make = int8_linear if self.precision == "int8" else bf16_linear
            self._products = [make(w.T.contiguous(), b) for w, b in zip(weights, biases)]
        self._signature = signature


def linear_source(layer: nn.Linear) -> WeightSource:
    """The weight (K, O) and bias of an `nn.Linear` as a `WeightSource`."""
    return lambda: (layer.weight.T, layer.bias)


def reduced_products(
    precision: Precision, sources: dict[str, tuple[WeightSource, Sequence[torch.Tensor]]]
) -> dict[str, ReducedProduct]:
    """One `ReducedProduct` per named source, or none at all for fp32."""
    if precision == "fp32":
        return {}
    return {
        name: ReducedProduct(precision, source, parameters) for name, (source, parameters) in sources.items()
    }


def bf16_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """`y = x @ weight.T + bias` in bf16 for weight (out, in): bf16 copies of the weight and bias,
    inputs cast to bf16, float32 accumulation, a bf16 result.

    On a CPU with bf16 units the weight is packed once into oneDNN's blocked layout (the layout
    `torch.compile` uses for CPU linears): at a few rows, as in an LSTM step at batch 1, that is
    several times faster than `F.linear` on the plain bf16 weight, with the same results.
    """
    copy = weight.detach().to(torch.bfloat16).contiguous()
    bias_copy = None if bias is None else bias.detach().to(torch.bfloat16)
    if _packed_bf16_available(weight.device):
        packed = torch.ops.mkldnn._reorder_linear_weight(copy)
        linear_pointwise = torch.ops.mkldnn._linear_pointwise
        return lambda inputs: linear_pointwise(inputs.to(torch.bfloat16), packed, bias_copy, "none", [], "")
    return lambda inputs: F.linear(inputs.to(torch.bfloat16), copy, bias_copy)


def _packed_bf16_available(device: torch.device) -> bool:
    return (
        device.type == "cpu"
        and bf16_products_supported(device)
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


def int8_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Module:
    """A dynamically quantised `y = x @ weight.T + bias`; weight (out, in), bias (out,) or None."""
    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    with warnings.catch_warnings():  # torch marks eager-mode quantisation as deprecated
        warnings.simplefilter("ignore")
        quantised = torch.ao.quantization.quantize_dynamic(
            nn.Sequential(linear), {nn.Linear}, dtype=torch.qint8
        )
    return quantised[0]
