"""The listener's scalar mix: `bilm.ScalarMix` behind a Thinc shim, against torch autograd on an
independent formula, and version 1's numpy mix against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from thinc.api import set_dropout_rate

from spacy_elmo.pipeline.legacy import elmo_mix_v1, mix_layers
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
    for doc_layers, d_output, output in zip(layers, d_outputs, outputs):
        mixed = gamma * (shares[:, None, None] * doc_layers).sum(dim=0)
        if projection is not None:
            W = torch.from_numpy(projection.get_param("W"))
            mixed = mixed @ W.T + torch.from_numpy(projection.get_param("b"))
        np.testing.assert_allclose(output, mixed.detach().numpy(), rtol=1e-5, atol=1e-6)
        loss = loss + (mixed * torch.from_numpy(d_output)).sum()
    loss.backward()
    np.testing.assert_allclose(module.weights.grad.numpy(), weights.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(module.gamma.grad), float(gamma.grad), rtol=1e-5)
    for got, want in zip(d_layers, layers):
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


# -- version 1 (numpy, hand-written gradients): kept to load pipelines trained with it ---------


@pytest.mark.parametrize("width", [None, 5])
def test_version_2_computes_what_version_1_did(width: int | None) -> None:
    """Same weights, same outputs and gradients: v2 changes the implementation, not the model."""
    layer_arrays, d_outputs = sample(width, seed=2)
    old = elmo_mix_v1(width=width, dropout=0.0, l2_lambda=0.1)
    new = elmo_mix(width=width, dropout=0.0, l2_lambda=0.1)
    old.initialize(X=layer_arrays)
    new.initialize(X=layer_arrays)
    old.set_param("layer_weights", np.asarray([0.3, -0.2, 0.5], dtype="float32"))
    old.set_param("gamma", np.asarray([1.7], dtype="float32"))
    with torch.no_grad():
        scalar_mix(new).weights.copy_(torch.tensor([0.3, -0.2, 0.5]))
        scalar_mix(new).gamma.fill_(1.7)
    if width:
        for name in ("W", "b"):
            new.layers[0].set_param(name, old.get_param(name).copy())
    (old_outputs, old_backprop), (new_outputs, new_backprop) = (
        model(layer_arrays, is_train=True) for model in (old, new)
    )
    for got, want in zip(new_outputs, old_outputs):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(new_backprop(d_outputs), old_backprop(d_outputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    new_gradients = [scalar_mix(new).weights.grad.numpy(), scalar_mix(new).gamma.grad.numpy()]
    for got, want in zip(new_gradients, (old.get_grad("layer_weights"), old.get_grad("gamma"))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if width:
        for name in ("W", "b"):
            np.testing.assert_allclose(new.layers[0].get_grad(name), old.get_grad(name), rtol=1e-5, atol=1e-6)


def loss_and_gradients(model, layer_arrays, d_outputs):
    outputs, backprop = model(layer_arrays, is_train=True)
    loss = sum(float((output * d_output).sum()) for output, d_output in zip(outputs, d_outputs))
    return loss, backprop


@pytest.mark.parametrize("width", [None, 5])
def test_version_1_gradients_match_finite_differences(width: int | None) -> None:
    layer_arrays, d_outputs = sample(width)
    model = elmo_mix_v1(width=width, dropout=0.0, l2_lambda=0.0)
    model.initialize(X=layer_arrays)
    model.set_param("layer_weights", np.asarray([0.3, -0.2, 0.5], dtype="float32"))
    model.set_param("gamma", np.asarray([1.7], dtype="float32"))
    _, backprop = loss_and_gradients(model, layer_arrays, d_outputs)
    d_layers = backprop(d_outputs)
    epsilon = 1e-2  # float32 (BLIS gemm): central differences are accurate to ~1e-4 here
    for name in [name for name in model.param_names if model.has_param(name)]:
        analytic = model.get_grad(name).copy()
        param = model.get_param(name)
        numeric = np.zeros_like(param)
        for index in np.ndindex(param.shape):
            for sign in (1, -1):
                shifted = param.copy()
                shifted[index] += sign * epsilon
                model.set_param(name, shifted)
                numeric[index] += sign * loss_and_gradients(model, layer_arrays, d_outputs)[0] / (2 * epsilon)
            model.set_param(name, param)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-3, atol=1e-3, err_msg=name)
    for doc_index, layers in enumerate(layer_arrays):
        numeric = np.zeros_like(layers)
        for index in np.ndindex(layers.shape):
            for sign in (1, -1):
                shifted = [array.copy() for array in layer_arrays]
                shifted[doc_index][index] += sign * epsilon
                numeric[index] += sign * loss_and_gradients(model, shifted, d_outputs)[0] / (2 * epsilon)
        np.testing.assert_allclose(d_layers[doc_index], numeric, rtol=1e-3, atol=1e-3)


def test_version_1_l2_penalty_and_frozen_input_gradient() -> None:
    model = elmo_mix_v1(width=None, dropout=0.0, l2_lambda=0.5)
    layer_arrays = [np.ones((3, 2, 4), dtype="float32")]
    model.initialize(X=layer_arrays)
    model.set_param("layer_weights", np.asarray([1.0, 0.0, -1.0], dtype="float32"))
    outputs, backprop = mix_layers(model, layer_arrays, True, input_gradient=False)
    assert backprop([np.zeros_like(outputs[0])]) == []
    np.testing.assert_allclose(model.get_grad("layer_weights"), [1.0, 0.0, -1.0])  # 2 * 0.5 * w
