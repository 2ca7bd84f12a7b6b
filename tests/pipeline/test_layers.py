"""The hand-written backprop of the scalar mix against finite differences, and the batching."""

from __future__ import annotations

import numpy as np
import pytest
from thinc.api import set_dropout_rate

from spacy_elmo.pipeline.layers import elmo_mix, mix_layers


def loss_and_gradients(model, layer_arrays, d_outputs):
    outputs, backprop = model(layer_arrays, is_train=True)
    loss = sum(float((output * d_output).sum()) for output, d_output in zip(outputs, d_outputs))
    return loss, backprop


@pytest.mark.parametrize("width", [None, 5])
def test_mix_gradients_match_finite_differences(width: int | None) -> None:
    rng = np.random.default_rng(0)
    model = elmo_mix(width=width, dropout=0.0, l2_lambda=0.0)
    layer_arrays = [rng.normal(size=(3, n, 4)).astype("float32") for n in (2, 0, 3)]
    model.initialize(X=layer_arrays)
    model.set_param("layer_weights", np.asarray([0.3, -0.2, 0.5], dtype="float32"))
    model.set_param("gamma", np.asarray([1.7], dtype="float32"))
    d_outputs = [rng.normal(size=(n, width or 4)).astype("float32") for n in (2, 0, 3)]
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


def test_l2_penalty_and_frozen_input_gradient() -> None:
    model = elmo_mix(width=None, dropout=0.0, l2_lambda=0.5)
    layer_arrays = [np.ones((3, 2, 4), dtype="float32")]
    model.initialize(X=layer_arrays)
    model.set_param("layer_weights", np.asarray([1.0, 0.0, -1.0], dtype="float32"))
    outputs, backprop = mix_layers(model, layer_arrays, True, input_gradient=False)
    assert backprop([np.zeros_like(outputs[0])]) == []
    np.testing.assert_allclose(model.get_grad("layer_weights"), [1.0, 0.0, -1.0])  # 2 * 0.5 * w
