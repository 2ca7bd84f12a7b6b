"""How the biLM's matrix products run: exact float32, bfloat16 or int8.

This is the one seam between the modules and the reduced-precision kernels. A module keeps its
float32 parameters (they are what training updates and what files hold) and, once a reduced
precision is set, a `Reduced` per product: the `ReducedProduct` of its mode (bfloat16 or int8),
or a `RowDispatch` holding one per mode where the mode depends on the row count. A
`ReducedProduct` makes its copy of the weight on first use and again whenever a parameter it
was made from changes. Everything around the products
(biases, gates, cell state, clipping, pooling) stays in float32.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from . import torch_probes
from .errors import InputError
from .precision_modes import (
    PRECISION_CHOICES,
    REDUCED_MODES,  # noqa: F401  (re-exported)
    Precision,
    PrecisionChoice,
)

WeightSource = Callable[[], tuple[torch.Tensor, torch.Tensor | None]]
"""Returns a product's float32 weight (..., K, O) and bias (..., O) or None, from the parameters."""


def native_bf16(device: torch.device) -> bool:
    """True where bfloat16 products run on hardware units: a CUDA device that supports bf16, or a
    CPU with AVX-512 bf16 or AMX bf16 instructions. oneDNN also runs bf16 on AVX-512 CPUs without
    them, by converting to float32: 5x slower than float32 on one we measured (docs/speed.md)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and torch_probes.native_bf16_cpu()


def check_precision(requested: str, device: torch.device) -> PrecisionChoice:
    """Check a precision name for `device`; warn where bf16 has no hardware units.

    "auto" stays "auto": `auto_precision.measured_plan` turns it into a mode per product on the
    CPU, and `gpu_auto_precision` on a GPU. int8 is CPU only.
    """
    if requested not in PRECISION_CHOICES:
        raise InputError(f"precision is {requested!r}: use one of {', '.join(PRECISION_CHOICES)}.")
    if requested == "int8" and device.type != "cpu":
        raise InputError(
            f"precision 'int8' runs on the CPU only, and this biLM is on {device}: use 'bf16' or 'auto'."
        )
    if requested == "int8" and not torch_probes.int8_supported():
        warnings.warn(
            f"This torch build ({torch.__version__}) has no int8 kernels for this CPU, so precision "
            "'int8' runs the exact float32 products.",
            stacklevel=3,
        )
    if requested == "bf16" and not native_bf16(device):
        warnings.warn(
            f"This {device.type.upper()} has no bfloat16 instructions, so precision 'bf16' is emulated "
            "and slower than 'fp32'; 'auto' measures which mode is fastest here.",
            stacklevel=3,
        )
    return cast(PrecisionChoice, requested)


def gpu_auto_precision(device: torch.device) -> Precision:
    """ "auto" on a GPU, where nothing is measured yet: bf16 where the device supports it, else fp32."""
    return "bf16" if device.type != "cpu" and native_bf16(device) else "fp32"


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
        self._signature: torch_probes.Signature = ()
        self._products: list[Callable[[torch.Tensor], torch.Tensor]] = []  # one per direction

    def for_rows(self, n_rows: int) -> ReducedProduct | None:
        """The product for inputs of `n_rows` rows: this one, whatever the rows."""
        return self

    @property
    def native_dtype(self) -> torch.dtype:
        """The dtype `native` returns."""
        return torch.bfloat16 if self.precision == "bf16" else torch.float32

    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        """(..., N, K) -> float32 (..., N, O)."""
        return self.native(inputs).float()

    def native(self, inputs: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """(..., N, K) -> (..., N, O) as the kernel returns it: bf16 for bf16, float32 for int8.

        For callers that reduce or add the result into float32 anyway (a max-pool, a sum of gate
        inputs), which then skip a float32 copy of the whole product. A stacked product's result
        (D, N, O) is written into `out` (of `native_dtype`) when given: a reused buffer, where a
        fresh one of that size would come from the operating system and page-fault on every call.
        """
        products = self.prepare()
        if inputs.dim() == 1:
            return products[0](inputs.unsqueeze(0)).squeeze(0)
        if inputs.dim() == 2:
            return products[0](inputs)
        return torch.stack([product(rows) for product, rows in zip(products, inputs)], out=out)

    def prepare(self) -> list[Callable[[torch.Tensor], torch.Tensor]]:
        """The reduced copies, one product per direction, made again if a source parameter has
        changed. Threads that find them stale at once each make the same copies and return their
        own; no lock, which a child forked while another thread held it would wait on forever."""
        signature = torch_probes.signature(self.parameters)
        if signature == self._signature:
            return self._products
        with torch.no_grad():
            weight, bias = self.source()
            weights = weight.unsqueeze(0) if weight.dim() == 2 else weight  # (D, K, O)
            biases = [None] * len(weights) if bias is None else list(bias.reshape(len(weights), -1))
            make = int8_linear if self.precision == "int8" else bf16_linear
            products = [make(w.T.contiguous(), b) for w, b in zip(weights, biases)]
        self._products = products  # before the signature: a thread that sees it sees them
        self._signature = signature
        return products


def linear_source(layer: nn.Linear) -> WeightSource:
    """The weight (K, O) and bias of an `nn.Linear` as a `WeightSource`."""
    return lambda: (layer.weight.T, layer.bias)


ONE_SENTENCE_ROWS = 24
"""Rows standing for one sentence: its tokens (LSTM input products) or its new word types."""
BATCH_ROWS = 64
"""Rows of each LSTM step in a batch of 64 sentences."""
MANY_ROWS = 128
"""Rows standing for a batch's tokens or new word types: enough for a product to run at its peak
rate (a batch of 64 sentences has more, which costs more to time and runs at the same rate)."""
WINDOWS_PER_WORD = 8
"""Character windows per word type and filter width, for timing the char convolutions."""


@dataclass(frozen=True)
class ProductSite:
    """One matrix product of a module that `BiLM.set_precision` can run reduced.

    `run(inputs, reduced)` computes it as the module does, through `reduced` or, with None, in
    float32; inputs are (N, K) for a (K, O) weight, (D, N, K) for a (D, K, O) one. `rows` are the
    row counts it typically sees (with one sentence, with a batch), at which "auto" times it.
    """

    kind: str
    source: WeightSource
    parameters: Sequence[torch.Tensor]
    run: Callable[[torch.Tensor, ReducedProduct | None], torch.Tensor]
    rows: tuple[int, ...]
    modes: tuple[Precision, ...] = ("fp32", "bf16", "int8")

    def weight_shape(self) -> tuple[int, ...]:
        """(K, O) or (D, K, O)."""
        return tuple(self.source()[0].shape)

    def inputs(self, n_rows: int) -> torch.Tensor:
        """Random float32 inputs of `n_rows` rows for the product, on its weight's device."""
        weight = self.parameters[0]
        *directions, width, _ = self.weight_shape()
        return torch.randn(*directions, n_rows, width, device=weight.device)


class ReducibleProducts(nn.Module):
    """A module whose matrix products can run reduced: it names them (`product_sites`) and runs
    each through its `Reduced` in `reduced` when there is one (set by `BiLM.set_precision`)."""

    def __init__(self) -> None:
        super().__init__()
        self.reduced: dict[str, Reduced] = {}  # not in state_dict

    def product_sites(self) -> dict[str, ProductSite]:
        raise NotImplementedError

    def set_product_modes(self, modes: dict[str, ProductModes]) -> None:
        """Run each named product in its modes from now on (a name not in `modes` runs in float32)."""
        self.reduced = {}
        for name, site in self.product_sites().items():
            product_modes = modes.get(name, FP32)
            if any(mode != "fp32" for _, mode in product_modes):
                self.reduced[name] = RowDispatch.of(product_modes, site)


ProductModes = tuple[tuple[int, Precision], ...]
"""A product's mode by row count: `((1, "fp32"), (64, "int8"))` runs inputs of fewer rows than
8 (the geometric mean of 1 and 64) in fp32 and the others in int8; one entry is every row count."""
FP32: ProductModes = ((1, "fp32"),)


def mode_for_rows(modes: ProductModes, n_rows: int) -> Precision:
    """The mode of the row count in `modes` nearest to `n_rows` on a log scale."""
    chosen = modes[0][1]
    for (fewer, _), (more, mode) in zip(modes, modes[1:]):
        if n_rows * n_rows >= fewer * more:
            chosen = mode
    return chosen


@dataclass(frozen=True)
class RowDispatch:
    """A product whose mode depends on its inputs' row count (`ProductModes`): each call runs the
    `ReducedProduct` of its mode, or float32 (None)."""

    modes: ProductModes
    products: dict[Precision, ReducedProduct]

    @classmethod
    def of(cls, modes: ProductModes, site: ProductSite) -> ReducedProduct | RowDispatch:
        """One `ReducedProduct` per reduced mode; just that product where one mode serves every row."""
        products = {
            mode: ReducedProduct(mode, site.source, site.parameters) for _, mode in modes if mode != "fp32"
        }
        if len(products) == 1 and all(mode != "fp32" for _, mode in modes):
            return next(iter(products.values()))
        return cls(modes, products)

    def for_rows(self, n_rows: int) -> ReducedProduct | None:
        return self.products.get(mode_for_rows(self.modes, n_rows))


Reduced = ReducedProduct | RowDispatch
"""How a product runs when it does not run in float32 at every row count."""


def for_inputs(reduced: Reduced | None, inputs: torch.Tensor) -> ReducedProduct | None:
    """The product to run `inputs` (..., N, K) with: a `ReducedProduct`, or None for float32."""
    if reduced is None:
        return None
    return reduced.for_rows(inputs.shape[-2] if inputs.dim() > 1 else 1)


def bf16_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """`y = x @ weight.T + bias` in bf16 for weight (out, in): bf16 copies of the weight and bias,
    inputs cast to bf16, float32 accumulation, a bf16 result.

    Where oneDNN runs bf16 on this CPU, the weight is packed once into its blocked layout (the
    layout `torch.compile` uses for CPU linears): at a few rows, as in an LSTM step at batch 1,
    that is several times faster than `F.linear` on the plain bf16 weight, with the same results.
    """
    copy = weight.detach().to(torch.bfloat16).contiguous()
    bias_copy = None if bias is None else bias.detach().to(torch.bfloat16)
    product = None
    if weight.device.type == "cpu" and torch_probes.mkldnn_bf16_supported():
        product = torch_probes.packed_bf16_linear(copy, bias_copy)
    if product is None:
        product = torch_probes.plain_bf16_linear(copy, bias_copy)
    return lambda inputs: product(inputs.to(torch.bfloat16))


def int8_linear(weight: torch.Tensor, bias: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """A dynamically quantised `y = x @ weight.T + bias`: weight (out, in), bias (out,) or None,
    inputs (N, in) -> float32 (N, out). Where this torch build has no int8 kernels
    (`torch_probes.int8_supported`), the exact float32 product: `check_precision` warns of it
    and "auto" does not time int8."""
    product = torch_probes.int8_linear(weight, bias)
    if product is not None:
        return product
    weight, bias = weight.detach().float().contiguous(), None if bias is None else bias.detach().float()
    return lambda inputs: F.linear(inputs.float(), weight, bias)
