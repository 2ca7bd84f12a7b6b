"""ScalarMix against numpy: the mix, AllenNLP's batch-global layer norm, L2 and dropout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import ScalarMix


def numpy_mix(layers, weights, gamma, mask=None):
    if mask is not None:  # batch-global standardisation per layer over unmasked elements
        normalised = []
        for layer in layers:
            values = layer[mask]  # (n_tokens, D)
            normalised.append((layer - values.mean()) / np.sqrt(values.var() + 1e-13))
        layers = np.stack(normalised)
    softmax = np.exp(weights) / np.exp(weights).sum()
    return gamma * np.einsum("l,l...->...", softmax, layers)


def make_inputs(seed=0):
    rng = np.random.default_rng(seed)
    layers = rng.normal(1.0, 3.0, size=(3, 4, 6, 10)).astype(np.float32)
    mask = np.zeros((4, 6), dtype=bool)
    for row, length in enumerate([6, 2, 0, 4]):
        mask[row, :length] = True
    return layers, mask


def test_initial_mix_is_the_plain_average():
    layers, _ = make_inputs()
    mixed = ScalarMix(3)(torch.from_numpy(layers))
    np.testing.assert_allclose(mixed.detach().numpy(), layers.mean(axis=0), atol=1e-6, rtol=0)


def test_trained_weights_and_gamma_match_numpy():
    layers, _ = make_inputs(1)
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.3, -1.2, 2.0]))
        mix.gamma.fill_(1.7)
    got = mix(torch.from_numpy(layers)).detach().numpy()
    np.testing.assert_allclose(got, numpy_mix(layers, np.array([0.3, -1.2, 2.0]), 1.7), atol=1e-5, rtol=0)


def test_layer_norm_uses_batch_global_statistics_of_unmasked_elements():
    layers, mask = make_inputs(2)
    mix = ScalarMix(3, do_layer_norm=True)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.5, 0.0, -0.5]))
    got = mix(torch.from_numpy(layers), torch.from_numpy(mask)).detach().numpy()
    want = numpy_mix(layers, np.array([0.5, 0.0, -0.5]), 1.0, mask)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    # masked positions take no part in the statistics
    changed = layers.copy()
    changed[:, ~mask] = 1e4
    got_changed = mix(torch.from_numpy(changed), torch.from_numpy(mask)).detach().numpy()
    np.testing.assert_allclose(got_changed[mask], got[mask], atol=1e-5, rtol=0)


def test_l2_penalty_is_lambda_times_squared_norm_and_has_gradient():
    mix = ScalarMix(3)
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([1.0, -2.0, 0.5]))
    penalty = mix.l2_penalty(0.1)
    assert penalty.item() == pytest.approx(0.1 * (1 + 4 + 0.25), rel=1e-6)
    penalty.backward()
    np.testing.assert_allclose(mix.weights.grad.numpy(), [0.2, -0.4, 0.1], rtol=1e-6)


@pytest.mark.parametrize("coefficient", [0.0, 0.1])
def test_l2_coefficient_adds_the_penalty_gradient_in_training_only(coefficient):
    layers, _ = make_inputs(3)
    d_mixed = torch.from_numpy(np.random.default_rng(4).normal(size=layers.shape[1:]).astype(np.float32))
    start = torch.tensor([1.0, -2.0, 0.5])

    def weight_gradient(mix: ScalarMix, add_penalty_to_loss: bool) -> np.ndarray:
        with torch.no_grad():
            mix.weights.copy_(start)
        loss = (mix(torch.from_numpy(layers)) * d_mixed).sum()
        if add_penalty_to_loss:
            loss = loss + coefficient * (mix.weights**2).sum()
        loss.backward()
        return mix.weights.grad.numpy()

    with_hook = weight_gradient(ScalarMix(3, l2_coefficient=coefficient), add_penalty_to_loss=False)
    by_hand = weight_gradient(ScalarMix(3), add_penalty_to_loss=True)
    np.testing.assert_allclose(with_hook, by_hand, rtol=1e-6, atol=1e-7)
    evaluated = ScalarMix(3, l2_coefficient=coefficient).eval()
    no_penalty = weight_gradient(ScalarMix(3), add_penalty_to_loss=False)
    np.testing.assert_allclose(weight_gradient(evaluated, add_penalty_to_loss=False), no_penalty, rtol=1e-6)


def test_dropout_drops_mixed_elements_in_training_only():
    layers = torch.ones(3, 200, 50)
    mix = ScalarMix(3, dropout=0.5)
    dropped = mix(layers)
    assert 0.4 < float((dropped == 0).float().mean()) < 0.6
    assert torch.all((dropped == 0) | (dropped == 2.0))  # survivors scaled by 1 / (1 - rate)
    assert torch.equal(mix.eval()(layers), torch.ones(200, 50))


def test_frozen_mix_has_no_trainable_parameters():
    assert not any(p.requires_grad for p in ScalarMix(3, trainable=False).parameters())
