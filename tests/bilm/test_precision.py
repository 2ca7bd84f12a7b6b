"""The reduced precisions (`BiLM.set_precision`) against the exact float32 path.

bf16 and int8 round every matrix product, so they are held to bounds, not to 1e-5. This tiny
random biLM clips its cells and projections hard, which makes it harder on rounding than the
published shapes: measured here, bf16 deviated by at most 0.056 (min cosine 0.9996) and int8 by
0.17 (0.996); in the published shapes both stay under 0.015 (docs/speed.md).
"""

from __future__ import annotations

import platform
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, InputError, auto_precision, batch_to_ids, torch_probes
from spacy_elmo.bilm import precision as precision_module
from spacy_elmo.bilm.precision import ReducedProduct, bf16_linear, check_precision

from ..conftest import REPO_ROOT
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
    not torch_probes.mkldnn_bf16_supported(), reason="oneDNN runs no bf16 on this CPU: nothing to pack"
)
def test_packed_bf16_product_equals_the_plain_bf16_product(monkeypatch) -> None:
    torch.manual_seed(0)
    weight, bias = torch.randn(96, 40), torch.randn(96)
    for n_rows in (1, 3, 57):
        inputs = torch.randn(n_rows, 40)
        packed = bf16_linear(weight, bias)(inputs)
        monkeypatch.setattr(torch_probes, "packed_bf16_linear", lambda weight, bias: None)
        plain = bf16_linear(weight, bias)(inputs)
        monkeypatch.undo()
        assert packed.dtype == plain.dtype == torch.bfloat16
        torch.testing.assert_close(packed, plain, rtol=0, atol=0)


def test_without_torchs_private_ops_the_probes_answer_no_and_bf16_still_runs(monkeypatch) -> None:
    """torch may rename or drop `torch.ops.mkldnn._*` in any release: the probes then say
    "not supported" and bf16 products take the public `F.linear`."""
    torch.manual_seed(0)
    weight, bias, inputs = torch.randn(96, 40), torch.randn(96), torch.randn(3, 40)
    want = torch.nn.functional.linear(inputs.bfloat16(), weight.bfloat16(), bias.bfloat16())
    monkeypatch.setattr(torch.ops, "mkldnn", object())  # a namespace with none of the ops
    assert not torch_probes.mkldnn_bf16_supported()
    assert torch_probes.packed_bf16_linear(weight.bfloat16(), None) is None
    torch.testing.assert_close(bf16_linear(weight, bias)(inputs), want, rtol=0, atol=0)
    monkeypatch.setattr(torch_probes, "cpu_flags", frozenset)  # no /proc/cpuinfo: oneDNN's answer
    assert not torch_probes.native_bf16_cpu()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="fbgemm's int8 kernels: x86 only")
def test_the_int8_kernels_are_there_and_compute_what_quantize_dynamic_does() -> None:
    """Fails when a torch release takes away the quantised ops `torch_probes.int8_linear` calls:
    int8 would then run the float32 products (the fallback below) without anyone deciding so."""
    assert torch_probes.int8_supported()
    torch.manual_seed(0)
    weight, bias, inputs = torch.randn(96, 40) * 3, torch.randn(96), torch.randn(17, 40)
    got = torch_probes.int8_linear(weight, bias)(inputs)
    quantize_dynamic = getattr(getattr(torch.ao, "quantization", None), "quantize_dynamic", None)
    if quantize_dynamic is None:  # the deprecated reference is gone: the kernels still run
        assert got.dtype == torch.float32 and got.shape == (17, 96)
        return
    linear = torch.nn.Linear(40, 96)
    with torch.no_grad():
        linear.weight.copy_(weight)
        linear.bias.copy_(bias)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.qint8)[0]
    torch.testing.assert_close(got, reference(inputs), rtol=0, atol=0)


def test_without_int8_kernels_int8_warns_and_runs_float32_and_auto_does_not_time_it(
    bilm, monkeypatch
) -> None:
    exact = bilm.embed_sentences(SENTENCES)
    monkeypatch.setattr(torch.ops, "quantized", object())  # a namespace with none of the ops
    monkeypatch.setattr(torch_probes, "int8_supported", lambda: False)
    assert torch_probes.int8_linear(torch.randn(4, 3), None) is None
    with pytest.warns(UserWarning, match="no int8 kernels.*exact float32"):
        bilm.set_precision("int8")
    for got, want in zip(bilm.embed_sentences(SENTENCES), exact):
        np.testing.assert_allclose(got, want, atol=1e-5)
    timed: set[str] = set()

    def timer(measurement: auto_precision.Measurement) -> float:
        timed.add(measurement.mode)
        return 1e-3

    auto_precision.measured_plan(bilm.product_sites(), cache_dir=None, timer=timer)
    assert timed == {"fp32", "bf16"}


def test_int8_products_are_made_without_swapping_the_warning_filters(monkeypatch) -> None:
    """`warnings.catch_warnings` replaces the process's filters for as long as it runs: a warning
    another thread raises meanwhile is lost, and two threads restoring at once leave one's filters
    behind. Making int8 products must not enter it."""

    entered: list[object] = []
    catch_warnings = warnings.catch_warnings
    monkeypatch.setattr(
        warnings,
        "catch_warnings",
        lambda *args, **kwargs: entered.append(args) or catch_warnings(*args, **kwargs),
    )
    weight, bias = torch.randn(2, 40, 96), torch.randn(2, 96)
    outputs = ReducedProduct("int8", lambda: (weight, bias), [weight, bias])(torch.randn(2, 5, 40))
    monkeypatch.undo()
    assert outputs.shape == (2, 5, 96) and not entered


def test_int8_passes_no_torch_warning_on(tmp_path) -> None:
    """torch warns once per process that quantised tensors are deprecated: not the biLM's users'
    business. In a fresh process, where that warning has not fired yet."""
    script = """
import pathlib, sys, warnings
from spacy_elmo.bilm import BiLM
from tests.bilm.random_weights import write_random_elmo
bilm = BiLM.from_allennlp(*write_random_elmo(pathlib.Path(sys.argv[1]))).set_precision("int8")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    bilm.embed_sentences([["int8", "words"]])
assert not caught, [str(warning.message) for warning in caught]
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "deprecated" not in done.stderr, done.stderr


def test_native_bf16_needs_the_cpus_bf16_instructions_not_onednns_word(monkeypatch) -> None:
    """oneDNN runs bf16 on AVX-512 CPUs without bf16 instructions, 5x slower than float32 on one:
    that is not native."""
    monkeypatch.setattr(torch_probes, "mkldnn_bf16_supported", lambda: True)
    monkeypatch.setattr(torch_probes, "cpu_flags", lambda: frozenset({"avx512f", "avx512_vnni"}))
    assert not torch_probes.native_bf16_cpu()
    monkeypatch.setattr(torch_probes, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert torch_probes.native_bf16_cpu()


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


def test_precision_errors_say_what_to_use() -> None:
    with pytest.raises(InputError, match="precision is 'fp16': use one of fp32, bf16, int8, auto"):
        check_precision("fp16", torch.device("cpu"))
    with pytest.raises(InputError, match="'int8' runs on the CPU only.*use 'bf16' or 'auto'"):
        check_precision("int8", torch.device("meta"))


def test_emulated_bf16_warns(monkeypatch) -> None:
    monkeypatch.setattr(precision_module, "native_bf16", lambda device: False)
    with pytest.warns(UserWarning, match="no bfloat16 instructions.*slower than 'fp32'"):
        assert check_precision("bf16", torch.device("cpu")) == "bf16"


BUNDLED_BOUNDS = {"bf16": (0.1, 0.999), "int8": (0.75, 0.99)}
"""precision -> the bounds docs/pipeline.md and docs/speed.md state for the bundled biLM's layers."""


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_the_bundled_bilm_stays_within_the_documented_deviation(precision, shared_data) -> None:
    """Measured on 2,001 EWT dev sentences: bf16 0.075 (cosine 0.99979), int8 0.555 (0.99362)."""
    from spacy_elmo.bundled import load_bundled_bilm

    from ..conftest import REPO_ROOT

    lines = (shared_data / "ud_en_ewt" / "en_ewt-ud-dev.conllu").read_text(encoding="utf8").splitlines()
    sentences = [line.removeprefix("# text = ").split() for line in lines if line.startswith("# text = ")][
        :300
    ]
    want = load_bundled_bilm().embed_sentences(sentences)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bf16 on a CPU without bf16 instructions warns, and runs
        got = load_bundled_bilm().set_precision(precision).embed_sentences(sentences)
    max_abs, min_cosine = deviation(got, want)
    bound, cosine_bound = BUNDLED_BOUNDS[precision]
    assert 0 < max_abs < bound and min_cosine > cosine_bound, (max_abs, min_cosine)
    documented = f"`{precision}` up to {bound:g}"
    for page in ("pipeline.md", "speed.md"):
        assert documented in (REPO_ROOT / "docs" / page).read_text(encoding="utf8"), page


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_a_reduced_stacked_product_is_written_into_a_lent_buffer(mode, monkeypatch):
    """Like the float32 one: a fresh result of a batch's size comes from the operating system on
    every call (int8's took 3x as long), so inference writes it into a reused buffer."""
    from spacy_elmo.bilm import products

    buffers = products.ReusedBuffers(max_kept=2)
    monkeypatch.setattr(products, "REUSED_BUFFERS", buffers)
    torch.manual_seed(0)
    weight, bias = torch.randn(2, 8, 12), torch.randn(2, 12)
    reduced = ReducedProduct(mode, lambda: (weight, bias), [weight, bias])
    inputs = torch.randn(2, 5, 8)
    with torch.no_grad():
        fresh = products.stacked_linear(inputs, weight, bias, reduced).clone()  # no scope: its own memory
        assert len(buffers) == 0
        with buffers.scope():
            lent = products.stacked_linear(inputs, weight, bias, reduced)
            assert lent.dtype == reduced.native_dtype and torch.equal(lent, fresh)
        assert len(buffers) == 1 and buffers._kept[0].data_ptr() == lent.data_ptr()
