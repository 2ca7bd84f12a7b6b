"""How the biLM's matrix products run, chosen by device and precision: the one place for fast paths.

The modules (`Highway`, `CharCNNTokenEncoder`, `ProjectedLSTMLayer`) hold float32 parameters and,
once a reduced precision is set, a `ReducedProduct` per weight (`precision.py`). They compute
every product through the functions here, which pick the kernel:

- a reduced precision (bf16, int8) on any device: the weight's `ReducedProduct` (for the
  inputs' row count, where the mode depends on it);
- float32 on a CUDA (or any non-CPU) device: the plain PyTorch product;
- float32 on the CPU: the plain product, or one of three CPU fast paths with the same values
  up to the order of float32 additions: few-row products split over blocks of output features
  (`linear`), the LSTM's input-to-gate products written into reused buffers
  (`stacked_linear`), and copies of the weights laid out for the product that reads them:
  oneDNN's packed copy of a large weight for products of a few to a few hundred rows, a
  transposed copy of an LSTM projection for its one-row steps (`WeightCopies`).

Any plan runs, whatever mode it gives each product at each row count, because every product
keeps one dtype contract. Inputs may be float32 or bf16: a reduced product casts them to its
kernel's dtype, a float32 one to its weight's. `linear`, `stacked_accumulate` and
`stacked_matmul` return float32. `matmul` and `stacked_linear` return their kernel's dtype, bf16
or float32, for callers that reduce the result into float32: a max-pool, and the gate sums of
`stacked_accumulate`, whose accumulator may be either.

The CPU's byte-sorted `unique_rows` lives here for the same reason. A new device or kernel is a
change to this module, not to the modules that call it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from . import torch_probes
from .errors import ConfigError
from .fork_safety import ForkSafeLock
from .precision import Reduced, for_inputs

logger = logging.getLogger(__name__)

FEW_ROWS = 48
"""Below this many rows, `linear` on the CPU splits a product over blocks of output features."""


def linear(layer: nn.Linear, inputs: torch.Tensor, reduced: Reduced | None = None) -> torch.Tensor:
    """`layer(inputs)`: inputs (N, K) float32 or bf16 -> float32 (N, O), through `reduced` when set.

    A large float32 `nn.Linear` on the CPU without autograd runs on its packed copy from 2 rows
    up (`WeightCopies`). Below `FEW_ROWS` rows otherwise, with several threads, it runs as one
    product batched over 2 x threads blocks of its output features: MKL computes a product with
    so few rows on one thread, while torch's `baddbmm` gives each thread its own blocks, and the
    weight (34 MB for a highway, read once per new word at batch 1) then streams about twice as
    fast. Each output is the same dot product either way.
    """
    reduced = for_inputs(reduced, inputs)
    if reduced is not None:
        return reduced(inputs)
    inputs = inputs.to(layer.weight.dtype)
    packed = WEIGHT_COPIES.packed(layer.weight, inputs.shape[0])
    if packed is not None:
        return packed[0](inputs, layer.bias)
    n_blocks = 2 * torch.get_num_threads()
    if (
        layer.bias is None
        or inputs.device.type != "cpu"
        or not 0 < inputs.shape[0] < FEW_ROWS
        or n_blocks < 4
        or layer.out_features % n_blocks
    ):
        return layer(inputs)
    block_width = layer.out_features // n_blocks
    weight_blocks = layer.weight.view(n_blocks, block_width, layer.in_features).transpose(1, 2)  # (b, K, O/b)
    bias_blocks = layer.bias.view(n_blocks, 1, block_width)
    blocks = torch.baddbmm(bias_blocks, inputs.expand(n_blocks, *inputs.shape), weight_blocks)  # (b, N, O/b)
    return blocks.transpose(0, 1).reshape(inputs.shape[0], layer.out_features)


def matmul(inputs: torch.Tensor, weight: torch.Tensor, reduced: Reduced | None = None) -> torch.Tensor:
    """inputs (..., K) float32 or bf16 @ weight (K, O) -> (..., O) in the kernel's dtype (bf16 or
    float32), for a caller that reduces the result into float32 anyway."""
    reduced = for_inputs(reduced, inputs)
    return torch.matmul(inputs.to(weight.dtype), weight) if reduced is None else reduced.native(inputs)


def stacked_linear(
    inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, reduced: Reduced | None = None
) -> torch.Tensor:
    """inputs (D, N, K) float32 or bf16 @ weight (D, K, O) + bias (D, O) -> (D, N, O) in the
    kernel's dtype (bf16 or float32), one product per direction.

    On the CPU without autograd, within a `REUSED_BUFFERS.scope()`, the result is written into a
    buffer lent to this thread and is valid until the scope ends. (In int8, a batch of 64
    sentences' products written into fresh memory took 3x as long: above 32 MB, glibc maps every
    allocation anew.)
    """
    reduced = for_inputs(reduced, inputs)
    out = None
    if not torch.is_grad_enabled() and inputs.device.type == "cpu":
        dtype = weight.dtype if reduced is None else reduced.native_dtype
        out = REUSED_BUFFERS.take((*inputs.shape[:2], weight.shape[2]), inputs.new_empty(0, dtype=dtype))
    if reduced is not None:
        return reduced.native(inputs, out=out)
    inputs = inputs.to(weight.dtype)
    packed = WEIGHT_COPIES.packed(weight, inputs.shape[1])
    if packed is not None:
        return packed_stack(packed, inputs, bias, out)
    return torch.baddbmm(bias.unsqueeze(1), inputs, weight, out=out)


def stacked_accumulate(
    accumulator: torch.Tensor,
    inputs: torch.Tensor,
    weight: torch.Tensor,
    reduced: Reduced | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """accumulator (D, n, O) + inputs (D, n, K) @ weight (D, K, O) -> float32 (D, n, O), written
    into `out` (float32 (D, n, O), not the accumulator; no autograd) when given.

    The accumulator (an LSTM step's gate inputs, from `stacked_linear`) may be bf16 or float32
    whatever mode this product runs in; it is read, never written.
    """
    reduced = for_inputs(reduced, inputs)
    if reduced is not None:
        product = reduced.native(inputs)
        return (product.float() if out is None else out.copy_(product)).add_(accumulator)
    inputs = inputs.to(weight.dtype)
    packed = WEIGHT_COPIES.packed(weight, inputs.shape[1])
    if packed is not None:
        return packed_stack(packed, inputs, None, out).add_(accumulator)
    return torch.baddbmm(accumulator.to(weight.dtype), inputs, weight, out=out)


def stacked_matmul(
    inputs: torch.Tensor,
    weight: torch.Tensor,
    reduced: Reduced | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """inputs (D, n, K) float32 or bf16 @ weight (D, K, O) -> float32 (D, n, O), written into
    `out` (float32 (D, n, O), no autograd) when given.

    In float32 without autograd, one row runs on the weight's transposed copy and 2 to 256 rows
    of a large weight on its packed copy (`WeightCopies`)."""
    reduced = for_inputs(reduced, inputs)
    if reduced is not None:  # copy_ converts a bf16 product once, into `out`
        return reduced(inputs) if out is None else out.copy_(reduced.native(inputs))
    inputs = inputs.to(weight.dtype)
    transposed = WEIGHT_COPIES.transposed(weight) if inputs.shape[1] == 1 else None
    if transposed is not None:
        return torch.bmm(inputs, transposed.transpose(1, 2), out=out)
    packed = WEIGHT_COPIES.packed(weight, inputs.shape[1])
    if packed is not None:
        return packed_stack(packed, inputs, None, out)
    return torch.bmm(inputs, weight, out=out)


def packed_stack(
    packed: list[torch_probes.PackedLinear],
    inputs: torch.Tensor,
    bias: torch.Tensor | None,
    out: torch.Tensor | None,
) -> torch.Tensor:
    """inputs (D, n, K) through each direction's packed product (+ bias (D, O)) -> float32
    (D, n, O), stacked into `out` when given."""
    biases = [None] * len(packed) if bias is None else list(bias)
    blocks = [product(rows, row_bias) for product, rows, row_bias in zip(packed, inputs, biases)]
    return torch.stack(blocks, out=out)


class ReusedBuffers:
    """Buffers that inference calls write their LSTM input-to-gate products into, lent to one
    thread at a time.

    These products are the largest tensor of a call (tens of MB for a batch of 64 sentences), and
    writing them into fresh memory slows the product down: every new allocation of that size comes
    from the operating system and page-faults on first touch. A thread borrows a buffer within a
    `scope` (one LSTM layer's forward pass) and gives it back at its end; the `max_kept` largest
    buffers given back are kept for the next scope of any thread and the others freed, so memory
    follows the number of calls running at once, not the number of threads that ever ran one.
    Autograd calls never use them.
    """

    def __init__(self, max_kept: int) -> None:
        self.max_kept = max_kept
        self._kept: list[torch.Tensor] = []  # smallest first
        self._lock = ForkSafeLock()  # a forked child finds it released
        self._lent = threading.local()

    def __len__(self) -> int:
        """How many buffers are kept now (not counting those lent)."""
        return len(self._kept)

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Within the block, `take` lends this thread buffers; they go back at its end."""
        outer: list[torch.Tensor] | None = getattr(self._lent, "buffers", None)
        self._lent.buffers = lent = []
        try:
            yield
        finally:
            self._lent.buffers = outer
            with self._lock:
                self._kept = sorted([*self._kept, *lent], key=torch.Tensor.numel)[-self.max_kept :]

    def take(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor | None:
        """An uninitialised tensor of `shape` with `like`'s dtype and device, lent until the end of
        this thread's `scope`: the smallest kept buffer that holds it, else a new one. None outside
        a scope."""
        lent: list[torch.Tensor] | None = getattr(self._lent, "buffers", None)
        if lent is None:
            return None
        n_values = math.prod(shape)
        with self._lock:
            fits = (
                index
                for index, kept in enumerate(self._kept)
                if kept.numel() >= n_values and kept.dtype == like.dtype and kept.device == like.device
            )
            index = next(fits, None)
            storage = like.new_empty(n_values) if index is None else self._kept.pop(index)
        lent.append(storage)
        return storage[:n_values].view(shape)


REUSED_BUFFERS = ReusedBuffers(max_kept=2)


PACKED_ROWS = (2, 256)
"""Row counts at which a large float32 product of a stacked (D, K, O) weight (an LSTM's input,
recurrent and projection products) runs on oneDNN's packed copy of it; an `nn.Linear` of the
token encoder takes its packed copy from 2 rows up (`WeightCopies`)."""
PACKED_MIN_VALUES = 2**20
"""Values (per direction of a stacked weight) from which a float32 weight is large enough for a
packed copy (4 MB: every highway, the original shape's token projection and LSTM weights; not the
small shape's LSTM weights, whose batch products it made up to 2x slower)."""
TRANSPOSED_MIN_VALUES = 2**18
"""Values per direction from which an LSTM projection weight gets a transposed copy for one-row
steps (1 MB: the medium and original shapes'; the small shape's stay in the cache, where the
layout made no difference)."""


COPIES_ENV = "SPACY_ELMO_WEIGHT_COPIES"
"""`on` (the default) or `off`: whether exact float32 products may run on weight copies."""


def copies_wanted() -> bool:
    """`SPACY_ELMO_WEIGHT_COPIES`: "on" (the default) or "off", read at every lookup of a copy so
    that a service can set it before its first request, and when a `BiLM` is built (so that a
    mistaken value is named whatever the model). Off trades the copies' speed for their memory
    (up to 270 MB per original-shape model, paid again by every spawned worker)."""
    setting = os.environ.get(COPIES_ENV, "on").strip().lower() or "on"
    if setting not in ("on", "off"):
        raise ConfigError(
            f"{COPIES_ENV}={os.environ[COPIES_ENV]!r}: use 'on' (large float32 weights get copies laid "
            "out for their products: faster, more memory) or 'off' (the plain products only)."
        )
    return setting == "on"


class WeightCopies:
    """Copies of float32 weights laid out for the products that read them at inference, made on
    first use and again when the weight changes (its storage or version), once per weight for all
    threads, and dropped with the weight. Autograd never uses them.

    - oneDNN's packed (blocked) copy of a large weight, for products of 2 or more rows. MKL repacks
      the whole weight on every such call, which costs more than the arithmetic; on an AMD EPYC (2
      threads, `bench/bench_packed.py`) the packed copy ran the LSTM products of a batch 1.2-1.8x
      and one sentence's highways and input products 2.3-2.9x as fast.
    - a transposed (D, O, K) copy of each LSTM projection weight, for the one-row steps of a
      sentence: a one-row product streams the weight's rows as dot products 1.4-1.8x as fast as
      it accumulates the (K, O) layout's rows.

    A copy costs its weight's size again in memory, so each kind is made only for the weights
    and row counts that gain from it, and none with `SPACY_ELMO_WEIGHT_COPIES=off`. A weight that
    oneDNN cannot pack runs the plain product until it changes, and says so once (a log warning):
    the other weights are packed all the same.
    """

    def __init__(self) -> None:
        self._copies: WeakIdKeyDictionary = WeakIdKeyDictionary()  # weight -> {kind: (signature, copy)}
        self._lock = ForkSafeLock()  # a forked child finds it released
        self._warned = False

    def count(self, kind: str = "packed") -> int:
        """How many weights have a usable copy of `kind` ("packed" or "transposed") now."""
        return sum(copies.get(kind, (None, None))[1] is not None for copies in self._copies.values())

    def forget(self, weights: Iterable[torch.Tensor]) -> None:
        """Drop the copies of `weights` (a precision change: the plan may not run them in float32
        any more, and timing "auto" packs the weights it times); the next float32 product through
        one of them makes them again."""
        with self._lock:
            for weight in weights:
                self._copies.pop(weight, None)

    def packed(self, weight: torch.Tensor, n_rows: int) -> list[torch_probes.PackedLinear] | None:
        """One packed product per direction of a stacked weight (D, K, O), or the one of an
        `nn.Linear` weight (O, K), for `n_rows` rows; None where the plain product serves."""
        stacked = weight.dim() == 3
        lowest, highest = PACKED_ROWS if stacked else (PACKED_ROWS[0], math.inf)
        if not lowest <= n_rows <= highest or not self._serves(weight, PACKED_MIN_VALUES):
            return None
        return self._copy(weight, "packed", lambda: self._pack(weight))

    def transposed(self, weight: torch.Tensor) -> torch.Tensor | None:
        """A stacked weight (D, K, O) as a contiguous (D, O, K) copy, or None where the plain
        product serves (autograd on, not on the CPU, not float32, too small, copies off)."""
        if not self._serves(weight, TRANSPOSED_MIN_VALUES):
            return None
        return self._copy(weight, "transposed", lambda: weight.transpose(1, 2).contiguous())

    @staticmethod
    def _serves(weight: torch.Tensor, min_values: int) -> bool:
        """Whether a copy of `weight` may serve its product now: float32 on the CPU, no
        autograd, at least `min_values` values per direction, copies not turned off (read last:
        a small weight's one-row steps skip reading the environment)."""
        return (
            weight.shape[-1] * weight.shape[-2] >= min_values
            and weight.dtype == torch.float32
            and weight.device.type == "cpu"
            and not torch.is_grad_enabled()
            and copies_wanted()
        )

    def _copy(self, weight: torch.Tensor, kind: str, make: Callable[[], Any]) -> Any:
        """`weight`'s copy of `kind`, made by `make` where there is none or the weight changed
        since (a lookup takes no lock: a step of one row calls it once per layer)."""
        signature = torch_probes.signature([weight])
        found = self._copies.get(weight, {}).get(kind)
        if found is not None and found[0] == signature:
            return found[1]
        with self._lock:
            copies = self._copies.setdefault(weight, {})
            found = copies.get(kind)
            if found is None or found[0] != signature:
                found = copies[kind] = (signature, make())
        return found[1]

    def _pack(self, weight: torch.Tensor) -> list[torch_probes.PackedLinear] | None:
        """Each direction's (O, K) weight packed, or None (with a warning, once) where oneDNN
        cannot pack one of them."""
        directions = [direction.T.contiguous() for direction in weight] if weight.dim() == 3 else [weight]
        products = [torch_probes.packed_linear(direction) for direction in directions]
        if None not in products:
            return cast(list[torch_probes.PackedLinear], products)
        if not self._warned:
            self._warned = True
            logger.warning(
                "oneDNN could not pack a %s weight (torch %s): the float32 products through it run "
                "the plain product, up to 2x slower at 2 to 256 rows.",
                "x".join(map(str, weight.shape)),
                torch.__version__,
            )
        return None


WEIGHT_COPIES = WeightCopies()


def unique_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, C) integer rows -> the distinct rows (U, C) and the index of each row among them (N,).

    On the CPU the rows are sorted as raw 2-byte strings by numpy (4-byte where an id passes
    32767: lexicon and word ids), much faster than `torch.unique(dim=0)`, which compares rows
    pair by pair. Elsewhere `torch.unique` runs where the rows are.
    """
    if rows.device.type != "cpu" or rows.shape[0] == 0:
        return torch.unique(rows, dim=0, return_inverse=True)
    narrow_type = np.int16 if int(rows.max()) <= np.iinfo(np.int16).max else np.int32
    narrow = np.ascontiguousarray(rows.numpy().astype(narrow_type))
    as_bytes = narrow.view(np.dtype((np.void, narrow.shape[1] * narrow.itemsize))).ravel()
    _, first_rows, inverse = np.unique(as_bytes, return_index=True, return_inverse=True)
    return rows[torch.from_numpy(first_rows)], torch.from_numpy(inverse.reshape(-1))


def uses_host_cache(rows: torch.Tensor) -> bool:
    """Whether a token-vector cache keyed by the rows' bytes serves rows on this device: on the CPU
    only; on a GPU, encoding every type costs less than moving keys to the host."""
    return rows.device.type == "cpu"
