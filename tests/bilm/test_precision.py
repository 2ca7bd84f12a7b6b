"""The reduced precisions (`BiLM.set_precision`) against the exact float32 path.

bf16 and int8 round every matrix product, so they are held to bounds, not to 1e-5. This tiny
random biLM clips its cells and projections hard, which makes it harder on rounding than the
published shapes: measured here, bf16 deviated by at most 0.056 (min cosine 0.9996) and int8 by
0.17 (0.996); in the published shapes both stay under 0.015 (docs/speed.md).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, InputError, batch_to_ids
from spacy_elmo.bilm import precision as precision_module
from spacy_elmo.bilm.precision import ReducedProduct, bf16_linear, resolve_precision

from .test_model import SENTENCES

BOUNDS = {"bf16": (0.1, 0.999), "int8": (0.3, 0.99)}
"""precision -> (max abs deviation from the exact layers, min cosine of a token vector)."""


def deviation(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float]:
    """Max abs difference and smallest cosine over every (layer, token) vector."""
    max_abs, min_cosine = 0.0, 1.0
    for a, b in zip(got, want):
        if not a.size:
            continue
        max_abs = max(max_abs, float(np.abs(a - b).max()))
        cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
        min_cosine = min(min_cosine, float(cosine.min()))
    return max_abs, min_cosine


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_reduced_precision_stays_within_its_bounds_and_keeps_float_weights(
    precision, random_elmo_files, tmp_path
) -> None:
    exact = BiLM.from_allennlp(*random_elmo_files)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bf16 on a CPU without bf16 instructions warns, and runs
        reduced = BiLM.from_allennlp(*random_elmo_files).set_precision(precision)
    assert reduced.precision == precision
    want = exact.embed_sentences(SENTENCES)
    got = reduced.embed_sentences(SENTENCES)
    max_abs, min_cosine = deviation(got, want)
    bound, cosine_bound = BOUNDS[precision]
    assert 0 < max_abs < bound and min_cosine > cosine_bound, (max_abs, min_cosine)
    assert reduced.state_dict().keys() == exact.state_dict().keys()
    assert all(tensor.dtype == torch.float32 for tensor in reduced.state_dict().values())
    reduced.save(tmp_path / "model")
    for got_row, want_row in zip(BiLM.load(tmp_path / "model").embed_sentences(SENTENCES), want):
        np.testing.assert_array_equal(got_row, want_row)


def test_fp32_after_a_reduced_precision_is_exact_again(bilm) -> None:
    want = bilm.embed_sentences(SENTENCES)
    bilm.set_precision("int8").set_precision("fp32")
    for got, expected in zip(bilm.embed_sentences(SENTENCES), want):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_reduced_copies_follow_new_weights(precision, random_elmo_files) -> None:
    """Weights loaded after set_precision are the ones the reduced products use."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        target = BiLM.from_allennlp(*random_elmo_files).set_precision(precision)
        torch.manual_seed(1)
        changed = BiLM(target.config)
        target.embed_sentences(SENTENCES)  # the reduced copies of the old weights exist now
        target.load_state_dict(changed.state_dict())
        fresh = BiLM(target.config)
        fresh.load_state_dict(changed.state_dict())
        fresh.set_precision(precision)
    for got, want in zip(target.embed_sentences(SENTENCES), fresh.embed_sentences(SENTENCES)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_reduced_precision_refuses_autograd(precision, bilm) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bilm.set_precision(precision)
    with pytest.raises(InputError, match="inference only"):
        bilm(batch_to_ids(SENTENCES))


@pytest.mark.skipif(
    not precision_module._packed_bf16_available(torch.device("cpu")),
    reason="this CPU has no bf16 instructions, so bf16 products do not use oneDNN's packed weights",
)
def test_packed_bf16_product_equals_the_plain_bf16_product(monkeypatch) -> None:
    torch.manual_seed(0)
    weight, bias = torch.randn(96, 40), torch.randn(96)
    for n_rows in (1, 3, 57):
        inputs = torch.randn(n_rows, 40)
        packed = bf16_linear(weight, bias)(inputs)
        monkeypatch.setattr(precision_module, "_packed_bf16_available", lambda device: False)
        plain = bf16_linear(weight, bias)(inputs)
        monkeypatch.undo()
        assert packed.dtype == plain.dtype == torch.bfloat16
        torch.testing.assert_close(packed, plain, rtol=0, atol=0)


def test_bf16_product_rounds_only_its_operands_and_result() -> None:
    """Against float64 products of the bf16-rounded operands: the only further error is the
    result's rounding to bf16 (relative 2^-8) and float32 accumulation."""
    torch.manual_seed(0)
    weight, bias, inputs = torch.randn(2, 40, 96), torch.randn(2, 96), torch.randn(2, 7, 40)
    product = ReducedProduct("bf16", lambda: (weight, bias), [weight, bias])
    rounded = [tensor.to(torch.bfloat16).double() for tensor in (inputs, weight, bias)]
    want = torch.baddbmm(rounded[2].unsqueeze(1), rounded[0], rounded[1])
    got = product(inputs)
    assert got.dtype == torch.float32 and got.shape == (2, 7, 96)
    torch.testing.assert_close(got.double(), want, rtol=2**-8, atol=1e-5)


def test_auto_picks_bf16_only_where_bf16_beats_int8(monkeypatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setattr(precision_module, "has_bf16_matrix_units", lambda device: True)
    assert resolve_precision("auto", cpu) == "bf16"
    monkeypatch.setattr(precision_module, "has_bf16_matrix_units", lambda device: False)
    assert resolve_precision("auto", cpu) == "int8"
    assert resolve_precision("auto", torch.device("meta")) == "fp32"


def test_precision_errors_say_what_to_use() -> None:
    with pytest.raises(InputError, match="precision is 'fp16': use one of fp32, bf16, int8, auto"):
        resolve_precision("fp16", torch.device("cpu"))
    with pytest.raises(InputError, match="'int8' runs on the CPU only.*use 'bf16' or 'auto'"):
        resolve_precision("int8", torch.device("meta"))


def test_emulated_bf16_warns(monkeypatch) -> None:
    monkeypatch.setattr(precision_module, "bf16_products_supported", lambda device: False)
    with pytest.warns(UserWarning, match="no bfloat16 instructions.*slower than 'fp32'"):
        assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
