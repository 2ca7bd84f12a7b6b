"""What this machine and this torch build offer, asked through torch's private ops in one place.

torch does not promise its private ops (`torch.ops.mkldnn.*`, `torch.ops.quantized.*`, a
tensor's `_version`) from one release to the next. Each is asked for here and nowhere else; where
one is missing, its probe answers as for a machine without the feature, so the biLM falls back
to the plain products and float32.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

CPUINFO = Path("/proc/cpuinfo")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags (Linux names) of instructions that multiply bf16 numbers in hardware."""


def mkldnn_bf16_supported() -> bool:
    """Whether oneDNN runs bf16 products on this CPU at all, natively or by converting to float32
    (AVX-512 without bf16 instructions counts): not whether they are fast."""
    probe = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return probe is not None and bool(probe())


PackedLinear = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]
"""(inputs (N, in), bias (out,) or None) -> (N, out), on a packed weight."""


def packed_linear(weight: torch.Tensor) -> PackedLinear | None:
    """`y = x @ weight.T + bias` on oneDNN's blocked copy of a float32 or bf16 (out, in) weight,
    or None where this torch build lacks the ops that pack and multiply it or cannot pack this
    weight (a CPU oneDNN does not serve)."""
    reorder = getattr(torch.ops.mkldnn, "_reorder_linear_weight", None)
    linear_pointwise = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
    if reorder is None or linear_pointwise is None:
        return None
    try:
        packed = reorder(weight)
    except RuntimeError:
        return None
    return lambda inputs, bias: linear_pointwise(inputs, packed, bias, "none", [], "")


def packed_bf16_linear(
    weight: torch.Tensor, bias: torch.Tensor | None
) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """`y = x @ weight.T + bias` on oneDNN's blocked copy of a bf16 (out, in) weight, or None
    where it cannot be packed (`packed_linear`)."""
    product = packed_linear(weight)
    return None if product is None else lambda inputs: product(inputs, bias)


def plain_bf16_linear(
    weight: torch.Tensor, bias: torch.Tensor | None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """`y = x @ weight.T + bias` with the public `F.linear` on a bf16 (out, in) weight."""
    return lambda inputs: F.linear(inputs, weight, bias)


Signature = tuple[tuple[int, int], ...]
"""Where each tensor's values live and how often they were written in place (`signature`)."""


def signature(tensors: Iterable[torch.Tensor]) -> Signature:
    """(storage address, in-place write counter) per tensor: it changes when a parameter is
    replaced or modified in place, which is when a copy made from it (a packed or reduced weight,
    a cached token vector) is stale."""
    return tuple((tensor.data_ptr(), tensor._version) for tensor in tensors)


warnings.filterwarnings(
    "ignore",
    message="torch.quantize_per_tensor, torch.quantize_per_channel and other quantized tensor creation",
    category=UserWarning,
    module=__name__,
)  # torch warns once per process that quantised tensors are deprecated; `int8_linear` makes one.
# Filtered here once, for this module only: `warnings.catch_warnings` around each call would swap
# every thread's filters while it runs.

INT8_LEVELS = 127.5
"""Half the int8 range: a weight's largest magnitude maps to this many steps, as torch's default
dynamic quantisation (`MinMaxObserver`, per-tensor symmetric) scales it."""


def int8_linear(
    weight: torch.Tensor, bias: torch.Tensor | None
) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """`y = x @ weight.T + bias` for a float32 (out, in) weight quantised to int8 per tensor and
    inputs (N, in) quantised per call, float32 (N, out) out: what
    `torch.ao.quantization.quantize_dynamic` makes of an `nn.Linear`, bit for bit, through the
    `torch.ops.quantized` kernels it calls, without that API (deprecated, and it warns on every
    call). None where this torch build lacks those kernels or cannot run them on this CPU: a
    test says so when a torch release takes them away.
    """
    try:
        make_quantized = torch._make_per_tensor_quantized_tensor
        prepack, linear_dynamic = torch.ops.quantized.linear_prepack, torch.ops.quantized.linear_dynamic
    except (AttributeError, RuntimeError):
        return None
    scale = float(np.float32(max(float(weight.abs().max()) / INT8_LEVELS, torch.finfo(torch.float32).eps)))
    inverse_scale = float(np.float32(1.0) / np.float32(scale))  # the kernels' float32 reciprocal
    levels = torch.round(weight.detach().float() * inverse_scale).clamp_(-128, 127).to(torch.int8)
    try:
        packed = prepack(make_quantized(levels, scale, 0), None if bias is None else bias.detach().float())
    except RuntimeError:  # no quantised engine for this CPU
        return None
    return lambda inputs: linear_dynamic(inputs.float(), packed, reduce_range=True)


@functools.cache
def int8_supported() -> bool:
    """Whether this torch build runs `int8_linear` on this CPU."""
    return int8_linear(torch.ones(1, 1), None) is not None


def cpu_flags() -> frozenset[str]:
    """The CPU's flags from /proc/cpuinfo; empty where there is no such file (not Linux)."""
    if not CPUINFO.exists():
        return frozenset()
    for line in CPUINFO.read_text(encoding="utf8", errors="replace").splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def cpu_model_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else the platform's processor string."""
    if CPUINFO.exists():
        for line in CPUINFO.read_text(encoding="utf8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def native_bf16_cpu() -> bool:
    """Whether the CPU multiplies bf16 numbers in hardware (AVX-512 bf16 or AMX bf16). Where the
    flags cannot be read, oneDNN's answer stands in."""
    flags = cpu_flags()
    if not flags:
        return mkldnn_bf16_supported()
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


@functools.cache
def cpu_identity() -> str:
    """The CPU's model name and a digest of its flags: two CPUs with one name and different
    instruction sets (an AMX Xeon and a Xeon without AMX exposed) get different identities."""
    digest = hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:12]
    return f"{cpu_model_name()} (flags {digest})"
