"""Softmax heads: the log-uniform sampler's distribution and the sampled softmax's gradient."""

from __future__ import annotations

import math

import torch

from spacy_elmo.bilm.lm_head import LogUniformSampler, SoftmaxHead


def test_log_uniform_sampler_draws_zipfian_ids_and_replays_from_its_state():
    sampler = LogUniformSampler(vocab_size=1000, seed=3)
    expected = sampler.log_probabilities.exp()
    assert math.isclose(float(expected.sum()), 1.0, rel_tol=1e-5)
    state = sampler.get_state()
    draws = sampler.sample(200_000)
    observed = torch.bincount(draws, minlength=1000).double() / draws.numel()
    assert torch.allclose(observed[:20], expected[:20].double(), rtol=0.05)
    assert abs(float(observed[100:].sum() - expected[100:].sum())) < 0.005
    sampler.set_state(state)
    assert torch.equal(sampler.sample(200_000), draws)


def gradients(head: SoftmaxHead, hidden: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
    """d loss / d (hidden, weight, bias), flattened."""
    return torch.cat([grad.flatten() for grad in torch.autograd.grad(loss, [hidden, head.weight, head.bias])])


def test_sampled_softmax_gradient_matches_the_full_softmax_gradient_in_expectation():
    """Averaged over draws, the corrected sampled softmax follows the full softmax's gradient; without
    the log(expected count) correction it does not (the test's own negative control)."""
    torch.manual_seed(0)
    vocab_size, n_samples, n_draws = 50, 100, 800
    head = SoftmaxHead(vocab_size, projection_dim=8)
    with torch.no_grad():  # a Zipfian unigram prior in the bias, as a trained model has
        head.bias.copy_(-torch.log(torch.arange(vocab_size, dtype=torch.float32) + 1.0))
    hidden = torch.randn(32, 8, requires_grad=True)
    targets = LogUniformSampler(vocab_size, seed=1).sample(32)
    full = gradients(head, hidden, head.full_loss(hidden, targets).mean())

    sampler = LogUniformSampler(vocab_size, seed=2)
    log_expected = sampler.log_probabilities + math.log(n_samples)
    corrected = torch.zeros_like(full)
    uncorrected = torch.zeros_like(full)
    for _ in range(n_draws):
        sampled_ids = sampler.sample(n_samples)
        corrected += gradients(
            head, hidden, head.sampled_loss(hidden, targets, sampled_ids, log_expected).mean()
        )
        no_correction = torch.zeros_like(log_expected)
        uncorrected += gradients(
            head, hidden, head.sampled_loss(hidden, targets, sampled_ids, no_correction).mean()
        )
    corrected /= n_draws
    uncorrected /= n_draws

    def relative_error(estimate: torch.Tensor) -> float:
        return float((estimate - full).norm() / full.norm())

    assert relative_error(corrected) < 0.05, relative_error(corrected)
    assert relative_error(uncorrected) > 0.3, relative_error(uncorrected)
    assert float(torch.nn.functional.cosine_similarity(corrected, full, dim=0)) > 0.998


def test_sampled_softmax_masks_samples_equal_to_the_target():
    head = SoftmaxHead(10, projection_dim=4)
    hidden, targets = torch.randn(3, 4), torch.tensor([1, 2, 3])
    log_expected = torch.zeros(10)
    only_hits = head.sampled_loss(hidden[:1], targets[:1], torch.tensor([1, 1]), log_expected)
    assert torch.allclose(only_hits, torch.zeros(1), atol=1e-6)  # the target alone: probability 1
    losses = head.sampled_loss(hidden, targets, torch.tensor([1, 5]), log_expected)
    logits = hidden @ head.weight.T + head.bias
    expected_first = -logits[0, 1] + torch.logsumexp(logits[0, [1, 5]], dim=0)
    assert torch.allclose(losses[0], expected_first, atol=1e-5)
