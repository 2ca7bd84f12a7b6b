"""The LSTM layer's in-place inference steps compute what its autograd steps compute."""

from __future__ import annotations

import pytest
import torch

from spacy_elmo.bilm import BiLM, batch_to_ids
from spacy_elmo.bilm.lstm import ProjectedLSTMLayer

from .test_model import SENTENCES

BATCH_SIZES = {
    "one row": [1] * 7,
    "same lengths": [3] * 5,
    "ragged": [4, 4, 3, 1, 1],
    "no steps": [],
}


def layer_and_inputs(
    batch_sizes: list[int], dtype: torch.dtype
) -> tuple[ProjectedLSTMLayer, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A layer with clipping that binds (large weights) and its inputs (D, B, T, P_in), initial state."""
    torch.manual_seed(0)
    layer = ProjectedLSTMLayer(2, 3, 8, 5, cell_clip=0.8, proj_clip=0.6).to(dtype)
    with torch.no_grad():
        layer.recurrent_weight.mul_(4.0)
        layer.bias.normal_(0.0, 0.5)
    n_rows = batch_sizes[0] if batch_sizes else 2
    inputs = torch.randn(2, n_rows, len(batch_sizes), 3, dtype=dtype)
    state = (torch.randn(2, n_rows, 5, dtype=dtype), torch.randn(2, n_rows, 8, dtype=dtype))
    return layer, inputs, state


@pytest.mark.parametrize("name", BATCH_SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_inference_steps_equal_autograd_steps(name, dtype):
    """The same arithmetic in the same order, so at most a rounding apart: a kernel may round a
    strided slice (rows that finished) differently from a contiguous tensor. Bit for bit where no
    row finishes early."""
    batch_sizes = BATCH_SIZES[name]
    layer, inputs, state = layer_and_inputs(batch_sizes, dtype)
    want_outputs, (want_hidden, want_cell) = layer(inputs, batch_sizes, state)
    initial = [tensor.clone() for tensor in state]
    with torch.no_grad():
        got_outputs, (got_hidden, got_cell) = layer(inputs, batch_sizes, state)
    tolerance = {"atol": 0, "rtol": 0} if name != "ragged" else {"atol": 1e-6, "rtol": 0}
    for got, want in [(got_outputs, want_outputs), (got_hidden, want_hidden), (got_cell, want_cell)]:
        assert got.shape == want.shape
        torch.testing.assert_close(got, want.detach(), **tolerance)
    assert all(torch.equal(before, after) for before, after in zip(initial, state)), "initial state changed"
    if batch_sizes:
        assert got_outputs[:, batch_sizes[-1] :, -1].eq(0).all(), "positions past a row's end must be 0"


def test_inference_steps_with_bf16_gate_inputs_match_the_autograd_arithmetic():
    """A bf16 input product gives bf16 gate inputs; the inference steps take a float32 copy of
    them and add the float32 recurrent products, as `stacked_accumulate` does."""
    batch_sizes = BATCH_SIZES["ragged"]
    layer, inputs, state = layer_and_inputs(batch_sizes, torch.float32)
    active = torch.arange(4).unsqueeze(0) < torch.tensor(batch_sizes).unsqueeze(1)
    packed = inputs.transpose(1, 2)[:, active]
    gate_inputs = torch.baddbmm(layer.gate_bias().unsqueeze(1), packed, layer.input_weight).bfloat16()
    with torch.no_grad():
        want_outputs, want_state = layer._steps(gate_inputs.split(batch_sizes, dim=1), batch_sizes, state)
        got_outputs, got_state = layer._inference_steps(gate_inputs, batch_sizes, state)
    torch.testing.assert_close(got_outputs, want_outputs, atol=1e-6, rtol=0)
    for got, want in zip(got_state, want_state):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8"])
def test_bilm_through_inference_steps_equals_bilm_through_autograd_steps(
    random_elmo_files, precision, monkeypatch
):
    """The whole model in each precision (its reduced products inside the steps), once through
    the in-place steps and once with them replaced by the autograd steps."""
    bilm = BiLM.from_allennlp(*random_elmo_files).set_precision(precision)
    char_ids = batch_to_ids(SENTENCES)
    with torch.no_grad():
        got = bilm(char_ids)[0]

        def autograd_steps(layer, gate_inputs, batch_sizes, initial_state):
            return layer._steps(layer._blocks_by_step(gate_inputs, batch_sizes), batch_sizes, initial_state)

        monkeypatch.setattr(ProjectedLSTMLayer, "_inference_steps", autograd_steps)
        want = bilm(char_ids)[0]
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
