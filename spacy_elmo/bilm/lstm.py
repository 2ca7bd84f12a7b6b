"""The projected, clipped LSTM of ELMo and its one-direction stacks with residuals (spec §4).

Weights keep bilm-tf's layout and gate order `[i, j, f, o]` (j is the candidate cell input), so
HDF5 import and export are pure slicing and transposing: bit for bit in both directions. The
forget bias of +1 is added at run time, as TensorFlow's `LSTMCell(forget_bias=1.0)` does.

Rows must be sorted by length, longest first: a step runs only on the rows still inside their
sequence, so padding never enters a recurrence and each row's final state is the state at its
own last position.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .quantization import int8_linear

FORGET_BIAS = 1.0

LSTMState = tuple[torch.Tensor, torch.Tensor]
"""(h (B, P), c (B, H)): the projected output and the memory cell of every row."""


class ProjectedLSTMLayer(nn.Module):
    """One LSTM layer with a cell of size H, a projection to P and cell/projection clipping."""

    def __init__(
        self,
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
        self.input_weight = nn.Parameter(torch.empty(input_dim, 4 * cell_dim))
        self.recurrent_weight = nn.Parameter(torch.empty(projection_dim, 4 * cell_dim))
        self.bias = nn.Parameter(torch.empty(4 * cell_dim))
        self.projection_weight = nn.Parameter(torch.empty(cell_dim, projection_dim))
        forget_offset = torch.zeros(4 * cell_dim)
        forget_offset[2 * cell_dim : 3 * cell_dim] = FORGET_BIAS
        self.register_buffer("forget_offset", forget_offset, persistent=False)
        self.int8_products: dict[str, nn.Module] = {}  # set by quantize_int8; not in state_dict
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """bilm-tf's training init: Glorot-uniform kernels, zero bias."""
        kernel_bound = math.sqrt(6.0 / (self.input_weight.shape[0] + self.projection_dim + 4 * self.cell_dim))
        nn.init.uniform_(self.input_weight, -kernel_bound, kernel_bound)
        nn.init.uniform_(self.recurrent_weight, -kernel_bound, kernel_bound)
        nn.init.zeros_(self.bias)
        nn.init.xavier_uniform_(self.projection_weight)

    def quantize_int8(self) -> None:
        """Run the input, recurrent and projection products in int8 from now on (inference only)."""
        with torch.no_grad():
            self.int8_products = {
                "input": int8_linear(self.input_weight.T, self.bias + self.forget_offset),
                "recurrent": int8_linear(self.recurrent_weight.T, None),
                "projection": int8_linear(self.projection_weight.T, None),
            }

    def zero_state(self, batch_size: int) -> LSTMState:
        """All-zero (h (B, P), c (B, H))."""
        weight = self.projection_weight
        return (
            weight.new_zeros(batch_size, self.projection_dim),
            weight.new_zeros(batch_size, self.cell_dim),
        )

    def forward(
        self, inputs: torch.Tensor, batch_sizes: list[int], initial_state: LSTMState
    ) -> tuple[torch.Tensor, LSTMState]:
        """Run the layer over length-sorted rows.

        Args:
            inputs: (B, T, P_in), rows sorted by length, longest first.
            batch_sizes: T ints, `batch_sizes[t]` = number of rows whose length exceeds t.
            initial_state: (h (B, P), c (B, H)).
        Returns:
            outputs (B, T, P), exactly 0 past each row's length, and the final state of every row
            (taken at its own last position; rows of length 0 return their initial state).
        """
        batch_size, max_length, _ = inputs.shape
        int8 = self.int8_products
        time_major = inputs.transpose(0, 1).reshape(-1, inputs.shape[-1])
        if int8:
            gate_inputs = int8["input"](time_major)
        else:  # all time steps in one product
            gate_inputs = torch.addmm(self.bias + self.forget_offset, time_major, self.input_weight)
        gate_inputs = gate_inputs.view(max_length, batch_size, -1)  # (T, B, 4H)
        hidden, cell = initial_state
        finished: list[LSTMState] = []
        step_outputs: list[torch.Tensor] = []
        for step in range(max_length):
            n_active = batch_sizes[step]
            if n_active < hidden.shape[0]:
                finished.append((hidden[n_active:], cell[n_active:]))
                hidden, cell = hidden[:n_active], cell[:n_active]
            if int8:
                gates = gate_inputs[step, :n_active] + int8["recurrent"](hidden)
            else:
                gates = torch.addmm(gate_inputs[step, :n_active], hidden, self.recurrent_weight)
            input_gate, candidate, forget_gate, output_gate = gates.chunk(4, dim=1)
            cell = torch.sigmoid(input_gate) * torch.tanh(candidate) + torch.sigmoid(forget_gate) * cell
            if self.cell_clip is not None:
                cell = cell.clamp(-self.cell_clip, self.cell_clip)
            output = torch.sigmoid(output_gate) * torch.tanh(cell)
            hidden = int8["projection"](output) if int8 else output @ self.projection_weight
            if self.proj_clip is not None:
                hidden = hidden.clamp(-self.proj_clip, self.proj_clip)
            missing_rows = batch_size - n_active
            step_outputs.append(F.pad(hidden, (0, 0, 0, missing_rows)) if missing_rows else hidden)
        finished.append((hidden, cell))
        final_hidden = torch.cat([state[0] for state in reversed(finished)])
        final_cell = torch.cat([state[1] for state in reversed(finished)])
        if step_outputs:
            outputs = torch.stack(step_outputs, dim=1)
        else:
            outputs = inputs.new_zeros(batch_size, 0, self.projection_dim)
        return outputs, (final_hidden, final_cell)


class LSTMStack(nn.Module):
    """The n_layers LSTM layers of one direction; layer j >= 1 adds its input when residual."""

    def __init__(
        self,
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
            ProjectedLSTMLayer(projection_dim, cell_dim, projection_dim, cell_clip, proj_clip)
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
        """token_vectors (B, T, P), length-sorted -> per-layer outputs [(B, T, P)] and final states.

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
