"""The projected, clipped LSTM of ELMo, run for both directions side by side.

Each layer keeps the weights of all its directions stacked along a leading direction axis, so
one batched matrix product per time step serves both directions: half the per-step operations
of running them one after the other, and both cores busy at batch 1. The per-direction slices keep
bilm-tf's layout and gate order `[i, j, f, o]` (j is the candidate cell input), so HDF5 import and
export are pure slicing and transposing: bit for bit in both directions. The forget bias of +1 is
added at run time, as TensorFlow's `LSTMCell(forget_bias=1.0)` does.

Rows must be sorted by length, longest first, and have the same length in every direction (the
backward direction reads each row reversed within its length): a step runs only on the rows still
inside their sequence, so padding never enters a recurrence and each row's final state is the
state at its own last position.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .precision import (
    BATCH_ROWS,
    MANY_ROWS,
    ONE_SENTENCE_ROWS,
    ProductSite,
    ReducedProduct,
    ReducibleProducts,
)
from .products import REUSED_BUFFERS, stacked_accumulate, stacked_linear, stacked_matmul

FORGET_BIAS = 1.0
DIRECTION_NAMES = ("forward_lstm", "backward_lstm")
"""State-dict prefixes of each direction's LSTM weights in our files and in the HDF5 mapping."""

MINUS_ONE = torch.tensor(-1.0)
"""A 0-dimensional tensor, so that `torch.add(MINUS_ONE, x, alpha=2)` computes tanh's 2 s - 1 in one
kernel (a Python number there would be wrapped into a new tensor on every call)."""

LSTMState = tuple[torch.Tensor, torch.Tensor]
"""(h (D, B, P), c (D, B, H)): the projected output and the memory cell of every direction and row."""


def tanh(values: torch.Tensor) -> torch.Tensor:
    """tanh(x) as 2 sigmoid(2x) - 1: within 2e-7 of tanh, and faster than `torch.tanh` on the
    CPU. The LSTM step uses it for the cell; the candidate's tanh shares the gates' sigmoid."""
    return torch.sigmoid(values + values) * 2.0 - 1.0


class ProjectedLSTMLayer(ReducibleProducts):
    """One LSTM layer per direction (D of them), each with a cell of size H, a projection to P and
    cell/projection clipping; their weights are stacked along a leading direction axis."""

    def __init__(
        self,
        n_directions: int,
        input_dim: int,
        cell_dim: int,
        projection_dim: int,
        cell_clip: float | None,
        proj_clip: float | None,
    ) -> None:
        super().__init__()
        self.cell_dim = cell_dim
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.input_weight = nn.Parameter(torch.empty(n_directions, input_dim, 4 * cell_dim))
        self.recurrent_weight = nn.Parameter(torch.empty(n_directions, projection_dim, 4 * cell_dim))
        self.bias = nn.Parameter(torch.empty(n_directions, 4 * cell_dim))
        self.projection_weight = nn.Parameter(torch.empty(n_directions, cell_dim, projection_dim))
        forget_offset = torch.zeros(4 * cell_dim)
        forget_offset[2 * cell_dim : 3 * cell_dim] = FORGET_BIAS
        self.register_buffer("forget_offset", forget_offset, persistent=False)
        # The candidate block's tanh as 2 sigmoid(2x) - 1, so that one sigmoid serves all 4 gates:
        # activated = sigmoid(gates * scale) * scale - (scale - 1), scale 2 on the candidate, else 1.
        gate_scale = torch.ones(4 * cell_dim)
        gate_scale[cell_dim : 2 * cell_dim] = 2.0
        self.register_buffer("gate_scale", gate_scale, persistent=False)
        negative_gate_shift = torch.zeros(4 * cell_dim)  # 1 - scale, built like scale: `1.0 - tensor`
        negative_gate_shift[cell_dim : 2 * cell_dim] = -1.0  # on the meta device imports torch._dynamo (2 s)
        self.register_buffer("negative_gate_shift", negative_gate_shift, persistent=False)
        self.reset_parameters()

    @property
    def n_directions(self) -> int:
        return self.input_weight.shape[0]

    def reset_parameters(self) -> None:
        """bilm-tf's training init, per direction: Glorot-uniform kernels, zero bias."""
        input_dim = self.input_weight.shape[1]
        kernel_bound = math.sqrt(6.0 / (input_dim + self.projection_dim + 4 * self.cell_dim))
        nn.init.uniform_(self.input_weight, -kernel_bound, kernel_bound)
        nn.init.uniform_(self.recurrent_weight, -kernel_bound, kernel_bound)
        nn.init.zeros_(self.bias)
        for projection_weight in self.projection_weight:
            nn.init.xavier_uniform_(projection_weight)

    def gate_bias(self) -> torch.Tensor:
        """(D, 4H): the bias with TensorFlow's forget bias added."""
        return self.bias + self.forget_offset

    def product_sites(self) -> dict[str, ProductSite]:
        """The input-to-gate, recurrent and projection products (the cell state, gates and
        clipping stay float32 at every precision)."""
        n_directions, cell_width = self.n_directions, 4 * self.cell_dim
        accumulator = functools.lru_cache(maxsize=1)(
            lambda n_rows: self.recurrent_weight.new_zeros(n_directions, n_rows, cell_width)
        )
        return {
            "input": ProductSite(
                "stacked_linear",
                lambda: (self.input_weight, self.gate_bias()),
                [self.input_weight, self.bias],
                self._time_input_product,
                (ONE_SENTENCE_ROWS, MANY_ROWS),
            ),
            "recurrent": ProductSite(
                "stacked_accumulate",
                lambda: (self.recurrent_weight, None),
                [self.recurrent_weight],
                lambda inputs, reduced: stacked_accumulate(
                    accumulator(inputs.shape[1]), inputs, self.recurrent_weight, reduced
                ),
                (1, BATCH_ROWS),
            ),
            "projection": ProductSite(
                "stacked_matmul",
                lambda: (self.projection_weight, None),
                [self.projection_weight],
                lambda inputs, reduced: stacked_matmul(inputs, self.projection_weight, reduced),
                (1, BATCH_ROWS),
            ),
        }

    def _time_input_product(self, inputs: torch.Tensor, reduced: ReducedProduct | None) -> None:
        """The input-to-gate product (D, N, P_in) -> (D, N, 4H) as `forward` runs it: into a
        reused buffer where it runs in float32."""
        with REUSED_BUFFERS.scope():
            stacked_linear(inputs, self.input_weight, self.gate_bias(), reduced)

    def zero_state(self, batch_size: int) -> LSTMState:
        """All-zero (h (D, B, P), c (D, B, H))."""
        weight = self.projection_weight
        return (
            weight.new_zeros(self.n_directions, batch_size, self.projection_dim),
            weight.new_zeros(self.n_directions, batch_size, self.cell_dim),
        )

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LSTMState
    ) -> tuple[torch.Tensor, LSTMState]:
        """Run every direction over its length-sorted rows.

        Args:
            inputs: (D, B, T, P_in), rows sorted by length, longest first.
            batch_sizes: T ints, `batch_sizes[t]` = number of rows whose length exceeds t.
            initial_state: (h (D, B, P), c (D, B, H)).
        Returns:
            outputs (D, B, T, P), exactly 0 past each row's length, and the final state of every row
            (taken at its own last position; rows of length 0 return their initial state).
        """
        n_directions, batch_size, max_length, _ = inputs.shape
        # The input-to-gate products of all steps in one product, over the real positions only:
        # time-major and packed, so step t's rows are one contiguous block.
        active = torch.arange(batch_size).unsqueeze(0) < torch.tensor(batch_sizes).unsqueeze(1)  # (T, B)
        packed_inputs = inputs.transpose(1, 2)[:, active.to(inputs.device)]  # (D, N, P_in)
        with REUSED_BUFFERS.scope():  # the gate inputs may live in a lent buffer until the steps end
            gate_inputs = stacked_linear(
                packed_inputs, self.input_weight, self.gate_bias(), self.reduced.get("input")
            )  # (D, N, 4H)
            if not torch.is_grad_enabled():
                return self._inference_steps(gate_inputs, batch_sizes, initial_state)
            return self._steps(self._blocks_by_step(gate_inputs, batch_sizes), batch_sizes, initial_state)

    def _steps(
        self, step_gate_inputs: Sequence[torch.Tensor], batch_sizes: list[int], initial_state: LSTMState
    ) -> tuple[torch.Tensor, LSTMState]:
        """The recurrence over the gate inputs of each step, T blocks (D, batch_sizes[t], 4H) in
        bf16 or float32 -> what `forward` returns, with a new tensor for every result, as
        autograd needs."""
        (n_directions, batch_size, _), max_length = initial_state[0].shape, len(batch_sizes)
        recurrent, projection = self.reduced.get("recurrent"), self.reduced.get("projection")
        hidden, cell = initial_state
        finished: list[LSTMState] = []
        step_outputs: list[torch.Tensor] = []
        for step in range(max_length):
            n_active = batch_sizes[step]
            if n_active < hidden.shape[1]:
                finished.append((hidden[:, n_active:], cell[:, n_active:]))
                hidden, cell = hidden[:, :n_active], cell[:, :n_active]
            gates = stacked_accumulate(step_gate_inputs[step], hidden, self.recurrent_weight, recurrent)
            activated = torch.addcmul(
                self.negative_gate_shift, torch.sigmoid(gates * self.gate_scale), self.gate_scale
            )  # (D, n, 4H): sigmoid of the input, forget and output gates, tanh of the candidate
            input_gate, candidate, forget_gate, output_gate = activated.chunk(4, dim=-1)
            cell = torch.addcmul(forget_gate * cell, input_gate, candidate)
            if self.cell_clip is not None:
                cell = cell.clamp(-self.cell_clip, self.cell_clip)
            hidden = stacked_matmul(output_gate * tanh(cell), self.projection_weight, projection)
            if self.proj_clip is not None:
                hidden = hidden.clamp(-self.proj_clip, self.proj_clip)
            missing_rows = batch_size - n_active
            step_outputs.append(F.pad(hidden, (0, 0, 0, missing_rows)) if missing_rows else hidden)
        finished.append((hidden, cell))
        final_hidden = torch.cat([state[0] for state in reversed(finished)], dim=1)
        final_cell = torch.cat([state[1] for state in reversed(finished)], dim=1)
        if step_outputs:
            outputs = torch.stack(step_outputs, dim=2)
        else:
            outputs = hidden.new_zeros(n_directions, batch_size, 0, self.projection_dim)
        return outputs, (final_hidden, final_cell)

    def _inference_steps(
        self, gate_inputs: torch.Tensor, batch_sizes: list[int], initial_state: LSTMState
    ) -> tuple[torch.Tensor, LSTMState]:
        """`_steps` without autograd, in place, with the same arithmetic: packed gate inputs
        (D, N, 4H) in bf16 or float32 -> what `forward` returns.

        A step writes its gate sums into one gates buffer (D, n, 4H), runs the gate arithmetic in
        place there and on one cell tensor, and writes its projection into its slice of one
        (T, D, B, P) outputs tensor, returned as a (D, B, T, P) view. At batch 1 a step's kernels
        each cost more to launch than to run on a few thousand values: this path launches fewer
        of them than `_steps` and allocates nothing, except new gate buffers when rows finish.
        """
        initial_hidden, initial_cell = initial_state
        n_directions, n_rows, _ = initial_hidden.shape
        recurrent, projection = self.reduced.get("recurrent"), self.reduced.get("projection")
        cell_clip, proj_clip = self.cell_clip, self.proj_clip
        gate_scale, negative_gate_shift = self.gate_scale, self.negative_gate_shift
        step_gate_inputs = gate_inputs.split(batch_sizes, dim=1)  # T views (D, batch_sizes[t], 4H)
        outputs = initial_hidden.new_zeros(len(batch_sizes), n_directions, n_rows, self.projection_dim)
        step_outputs = outputs.unbind(0)  # T views (D, B, P)
        final_hidden, final_cell = initial_hidden.clone(), initial_cell.clone()
        hidden, cell = initial_hidden, final_cell  # the cell is updated in place
        gates = initial_cell.new_empty(n_directions, n_rows, 4 * self.cell_dim)
        cell_output = torch.empty_like(cell)  # (D, n, H): o * tanh(cell)
        input_gate, candidate, forget_gate, output_gate = gates.chunk(4, dim=-1)
        for step, n_active in enumerate(batch_sizes):
            if n_active < n_rows:  # rows finish: keep their last output, step only the others
                final_hidden[:, n_active:n_rows] = hidden[:, n_active:]
                hidden, cell = hidden[:, :n_active], cell[:, :n_active]
                # Contiguous buffers: a matrix product into a strided slice runs direction by direction.
                gates = gates.new_empty(n_directions, n_active, 4 * self.cell_dim)
                cell_output = cell_output.new_empty(n_directions, n_active, self.cell_dim)
                input_gate, candidate, forget_gate, output_gate = gates.chunk(4, dim=-1)
                n_rows = n_active
            step_output = step_outputs[step]
            if n_rows < step_output.shape[1]:
                step_output = step_output[:, :n_rows]
            stacked_accumulate(step_gate_inputs[step], hidden, self.recurrent_weight, recurrent, out=gates)
            torch.addcmul(negative_gate_shift, gates.mul_(gate_scale).sigmoid_(), gate_scale, out=gates)
            cell.mul_(forget_gate).addcmul_(input_gate, candidate)
            if cell_clip is not None:
                cell.clamp_(-cell_clip, cell_clip)
            torch.add(cell, cell, out=cell_output).sigmoid_()  # tanh(cell) = 2 sigmoid(2 cell) - 1
            torch.add(MINUS_ONE, cell_output, alpha=2, out=cell_output).mul_(output_gate)
            hidden = stacked_matmul(cell_output, self.projection_weight, projection, out=step_output)
            if proj_clip is not None:
                hidden.clamp_(-proj_clip, proj_clip)
        final_hidden[:, :n_rows] = hidden
        return outputs.permute(1, 2, 0, 3), (final_hidden, final_cell)

    @staticmethod
    def _blocks_by_step(gate_inputs: torch.Tensor, batch_sizes: list[int]) -> Sequence[torch.Tensor]:
        """Packed (D, N, 4H) -> T blocks (D, batch_sizes[t], 4H), views.

        One split, not a slice per step: a slice's backward writes its gradient into a zeroed copy
        of the whole (D, N, 4H) tensor, T times per layer; the split's backward is one
        concatenation (`bench/bench_pretrain.py` measures both).
        """
        return gate_inputs.split(batch_sizes, dim=1)


class LSTMStack(nn.Module):
    """n_layers LSTM layers, each running D directions side by side; layer j >= 1 adds its input
    when residual."""

    def __init__(
        self,
        n_directions: int,
        n_layers: int,
        projection_dim: int,
        cell_dim: int,
        cell_clip: float | None,
        proj_clip: float | None,
        use_skip_connections: bool,
    ) -> None:
        super().__init__()
        self.use_skip_connections = use_skip_connections
        self.layers = nn.ModuleList(
            ProjectedLSTMLayer(n_directions, projection_dim, cell_dim, projection_dim, cell_clip, proj_clip)
            for _ in range(n_layers)
        )

    def zero_states(self, batch_size: int) -> list[LSTMState]:
        return [layer.zero_state(batch_size) for layer in self.layers]

    def forward(
        self,
        token_vectors: torch.Tensor,
        batch_sizes: list[int],
        initial_states: list[LSTMState],
        dropout: float = 0.0,
    ) -> tuple[list[torch.Tensor], list[LSTMState]]:
        """token_vectors (D, B, T, P), length-sorted -> per-layer outputs [(D, B, T, P)] and final
        states [(h (D, B, P), c (D, B, H))], one per layer.

        `dropout` (training only) drops each layer's input, and the residual adds the dropped
        input, as bilm-tf's `DropoutWrapper(ResidualWrapper(cell))` does.
        """
        layer_input = token_vectors
        layer_outputs: list[torch.Tensor] = []
        final_states: list[LSTMState] = []
        for index, (layer, initial_state) in enumerate(zip(self.layers, initial_states)):
            if dropout:
                layer_input = F.dropout(layer_input, dropout, self.training)
            output, final_state = layer(layer_input, batch_sizes, initial_state)
            if self.use_skip_connections and index > 0:
                output = output + layer_input
            layer_outputs.append(output)
            final_states.append(final_state)
            layer_input = output
        return layer_outputs, final_states
