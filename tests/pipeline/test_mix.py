"""The listener's scalar mix: `bilm.ScalarMix` behind a Thinc shim, against torch autograd on an
independent formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from thinc.api import set_dropout_rate

from spacy_elmo.pipeline.mix import elmo_mix, scalar_mix

LENGTHS = (2, 0, 3)


def sample(width: int | None, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    layer_arrays = [rng.normal(size=(3, n, 4)).astype("float32") for n in LENGTHS]
    d_outputs = [rng.normal(size=(n, width or 4)).astype("float32") for n in LENGTHS]
    return layer_arrays, d_outputs


@pytest.mark.parametrize("width", [None, 5])
@pytest.mark.parametrize("l2_lambda", [0.0, 0.3])
def test_gradients_match_autograd_of_the_papers_formula(width: int | None, l2_lambda: float) -> None:
    layer_arrays, d_outputs = sample(width)
    model = elmo_mix(width=width, dropout=0.0, l2_lambda=l2_lambda)
    model.initialize(X=layer_arrays)
    module = scalar_mix(model)
    with torch.no_grad():
        module.weights.copy_(torch.tensor([0.3, -0.2, 0.5]))
        module.gamma.fill_(1.7)
    outputs, backprop = model(layer_arrays, is_train=True)
    d_layers = backprop(d_outputs)

    # The same loss written out in torch from the paper: gamma * sum_j softmax(w)_j h_j, then W x + b.
    weights = torch.tensor([0.3, -0.2, 0.5], requires_grad=True)
    gamma = torch.tensor(1.7, requires_grad=True)
    layers = [torch.from_numpy(array.copy()).requires_grad_() for array in layer_arrays]
    shares = torch.exp(weights) / torch.exp(weights).sum()
    loss = l2_lambda * (weights**2).sum()
    projection = model.layers[0] if width else None
    for doc_layers, d_output, output in zip(layers, d_outputs, outputs, strict=True):
        mixed = gamma * (shares[:, None, None] * doc_layers).sum(dim=0)
        if projection is not None:
            W = torch.from_numpy(projection.get_param("W"))
            mixed = mixed @ W.T + torch.from_numpy(projection.get_param("b"))
        np.testing.assert_allclose(output, mixed.detach().numpy(), rtol=1e-5, atol=1e-6)
        loss = loss + (mixed * torch.from_numpy(d_output)).sum()
    loss.backward()
    np.testing.assert_allclose(module.weights.grad.numpy(), weights.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(module.gamma.grad), float(gamma.grad), rtol=1e-5)
    for got, want in zip(d_layers, layers, strict=True):  # a gradient for every doc
        np.testing.assert_allclose(got, want.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_the_configured_dropout_survives_spacys_training_dropout() -> None:
    """spaCy's update calls `set_dropout_rate(model, [training] dropout)` on the whole component;
    the mix must keep the rate its config set, not take the training one."""
    model = elmo_mix(width=None, dropout=0.5, l2_lambda=0.0)
    layer_arrays = [np.ones((3, 2000, 4), dtype="float32")]
    model.initialize(X=layer_arrays)
    set_dropout_rate(model, 0.0)
    outputs, _ = model(layer_arrays, is_train=True)
    assert 0.45 < float((outputs[0] == 0).mean()) < 0.55
    outputs, _ = model(layer_arrays, is_train=False)
    assert not (outputs[0] == 0).any()


def test_without_input_gradient_only_the_mix_learns() -> None:
    layer_arrays, d_outputs = sample(None, seed=1)
    model = elmo_mix(width=None, dropout=0.0, l2_lambda=0.0, input_gradient=False)
    model.initialize(X=layer_arrays)
    _, backprop = model(layer_arrays, is_train=True)
    assert backprop(d_outputs) == []
    assert scalar_mix(model).weights.grad is not None


def test_weights_survive_serialization_without_pickle() -> None:
    layer_arrays, _ = sample(5)
    model = elmo_mix(width=5, dropout=0.1, l2_lambda=0.2)
    model.initialize(X=layer_arrays)
    with torch.no_grad():
        scalar_mix(model).weights.copy_(torch.tensor([0.1, 0.2, -0.3]))
    data = model.to_bytes()
    assert b"PK" not in data[:64] and b"torch" not in data  # safetensors, not a pickled zip
    loaded = elmo_mix(width=5, dropout=0.1, l2_lambda=0.2).from_bytes(data)
    module = scalar_mix(loaded)
    assert (module.dropout, module.l2_coefficient) == (0.1, 0.2)
    for got, want in zip(loaded.predict(layer_arrays), model.predict(layer_arrays)):
        np.testing.assert_array_equal(got, want)
