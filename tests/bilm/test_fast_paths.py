"""Every optimisation of the exact path gives the unoptimised outputs (to 1e-5)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from spacy_elmo.bilm import BiLM, batch_to_ids, products, token_encoder, torch_probes
from spacy_elmo.bilm.chars import PADDING_CHAR, bos_token_ids, eos_token_ids, token_to_ids
from spacy_elmo.bilm.errors import ConfigError
from spacy_elmo.bilm.lstm import ProjectedLSTMLayer
from spacy_elmo.bilm.products import FEW_ROWS, PACKED_ROWS, linear, unique_rows
from spacy_elmo.bilm.token_encoder import content_lengths

from .forking import forked_result
from .test_model import SENTENCES

pytestmark = pytest.mark.numerics

needs_weight_copies = pytest.mark.skipif(
    not products.copies_wanted(),
    reason="tests the weight copies, which SPACY_ELMO_WEIGHT_COPIES=off turns off",
)

ATOL = 1e-5


def conv1d_token_encoder(bilm: BiLM, char_ids: torch.Tensor) -> torch.Tensor:
    """The token encoder written the textbook way: conv1d over all positions, then max-pool."""
    encoder = bilm.token_encoder
    embedded = F.embedding(char_ids, F.pad(encoder.char_embedding, (0, 0, 1, 0))).transpose(1, 2)
    hidden = torch.cat([torch.relu(conv(embedded).amax(dim=-1)) for conv in encoder.convolutions], dim=-1)
    for highway in encoder.highways:
        hidden = highway(hidden)
    return encoder.projection(hidden)


@pytest.fixture(params=["one group", "length groups"])
def grouping(request, monkeypatch) -> str:
    """The token encoder's rows as one group (a sentence's few word types) or in length groups (a
    batch's many): the tests' few rows take either path."""
    monkeypatch.setattr(token_encoder, "GROUPED_MIN_ROWS", 10**9 if request.param == "one group" else 0)
    return request.param


def test_windowed_matrix_product_convolution_equals_conv1d(bilm, grouping):
    char_ids = batch_to_ids(SENTENCES).reshape(-1, 50)
    with torch.no_grad():
        torch.testing.assert_close(
            bilm.token_encoder(char_ids), conv1d_token_encoder(bilm, char_ids), atol=ATOL, rtol=0
        )


def edge_case_char_ids() -> torch.Tensor:
    """Rows in every length group: short and long words, a word too long for its row (truncated,
    ends in EOW, no padding), a 48-byte word (ends in EOW), sentence boundaries, an empty row (0s)."""
    words = ["a", "the", "Rome", "international", "antidisestablishmentarianism", "x" * 48, "y" * 70]
    rows = [token_to_ids(word) for word in words] + [bos_token_ids(), eos_token_ids(), np.zeros(50, np.int64)]
    return torch.from_numpy(np.stack(rows))


@pytest.mark.parametrize("padding_wins", [False, True])
def test_convolution_skipping_padding_windows_equals_conv1d_in_values_and_gradients(
    bilm, padding_wins, grouping
):
    """Values in float32, as used. Gradients in float64: each gradient sums thousands of float32
    products in an order that depends on the CPU's kernels (the padding row's gradient differed by
    3e-4 of 11 on one AMD EPYC and not on another), while in float64 the two must agree to 1e-9."""
    encoder = bilm.token_encoder
    if padding_wins:  # make the padding character's windows the maximum of many filters
        with torch.no_grad():
            encoder.char_embedding[PADDING_CHAR] = 5.0 * encoder.char_embedding[PADDING_CHAR].sign()
    char_ids = edge_case_char_ids()
    assert (content_lengths(char_ids) == torch.tensor([3, 5, 6, 15, 30, 50, 50, 3, 3, 0])).all()
    with torch.no_grad():
        torch.testing.assert_close(encoder(char_ids), conv1d_token_encoder(bilm, char_ids), atol=ATOL, rtol=0)
    bilm.double()
    trimmed = encoder(char_ids)
    trimmed_gradients = torch.autograd.grad(trimmed.square().sum(), list(encoder.parameters()))
    textbook = conv1d_token_encoder(bilm, char_ids)
    textbook_gradients = torch.autograd.grad(textbook.square().sum(), list(encoder.parameters()))
    torch.testing.assert_close(trimmed, textbook, atol=1e-12, rtol=0)
    for got, want in zip(trimmed_gradients, textbook_gradients):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-12)


def test_cached_token_vectors_equal_uncached_ones(random_elmo_files):
    cached = BiLM.from_allennlp(*random_elmo_files)
    uncached = BiLM.from_allennlp(*random_elmo_files)
    uncached.token_cache.max_entries = 0
    cached.embed_sentences(SENTENCES[:2])  # warm the cache with part of the words
    assert len(cached.token_cache) > 0
    for hit, fresh in zip(cached.embed_sentences(SENTENCES), uncached.embed_sentences(SENTENCES)):
        np.testing.assert_allclose(hit, fresh, atol=ATOL, rtol=0)
    assert len(uncached.token_cache) == 0


def test_cache_is_dropped_when_weights_change(bilm):
    before = bilm.embed_sentences(SENTENCES)
    with torch.no_grad():
        bilm.token_encoder.projection.bias.add_(1.0)
    after = bilm.embed_sentences(SENTENCES)
    fresh = BiLM(bilm.config)
    fresh.load_state_dict(bilm.state_dict())
    fresh.token_cache.max_entries = 0
    for stale, new, reference in zip(before, after, fresh.embed_sentences(SENTENCES)):
        assert not np.allclose(stale, new)
        np.testing.assert_allclose(new, reference, atol=ATOL, rtol=0)


def test_cache_is_bypassed_while_autograd_records(bilm):
    layers, _ = bilm(batch_to_ids(SENTENCES))
    assert len(bilm.token_cache) == 0
    layers.sum().backward()
    assert bilm.token_encoder.char_embedding.grad.abs().sum() > 0


def test_cache_size_is_bounded(bilm):
    bilm.token_cache.max_entries = 5
    bilm.embed_sentences(SENTENCES)
    assert len(bilm.token_cache) == 5


def test_length_sorted_batches_equal_input_order_batches(bilm):
    bilm.token_cache.max_entries = 0
    sorted_batches = bilm.embed_sentences(SENTENCES, batch_size=2)
    with torch.no_grad():
        for start in range(0, len(SENTENCES), 2):
            chunk = SENTENCES[start : start + 2]
            layers, _ = bilm(batch_to_ids(chunk))
            for row, tokens in enumerate(chunk):
                np.testing.assert_allclose(
                    sorted_batches[start + row], layers[:, row, : len(tokens)].numpy(), atol=ATOL, rtol=0
                )


def test_token_budget_bounds_every_batch_and_keeps_outputs(bilm, monkeypatch):
    seen_shapes = []
    original_forward = BiLM.forward

    def recording_forward(self, char_ids, **kwargs):
        seen_shapes.append(tuple(char_ids.shape[:2]))
        return original_forward(self, char_ids, **kwargs)

    reference = bilm.embed_sentences(SENTENCES)
    monkeypatch.setattr(BiLM, "forward", recording_forward)
    budgeted = bilm.embed_sentences(SENTENCES, max_batch_tokens=12)
    assert len(seen_shapes) > 1
    assert all(rows == 1 or rows * (longest + 2) <= 12 for rows, longest in seen_shapes)
    for got, want in zip(budgeted, reference):
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


def test_lstm_tanh_identity_matches_tanh_in_values_and_gradients():
    from spacy_elmo.bilm.lstm import tanh

    values = torch.cat(
        [torch.linspace(-30, 30, 20001), torch.tensor([-1e4, -88.0, -1e-7, 0.0, 1e-7, 88.0, 1e4])]
    )
    values.requires_grad_(True)
    got = tanh(values)
    got.sum().backward()
    want = torch.tanh(values.detach().double())
    assert torch.isfinite(got).all() and torch.isfinite(values.grad).all()
    assert float((got.detach().double() - want).abs().max()) < 2.5e-7
    assert float((values.grad.double() - (1 - want**2)).abs().max()) < 5e-7


def test_unique_rows_returns_every_distinct_row_once_and_an_inverse_that_rebuilds_the_input():

    char_ids = batch_to_ids([["the", "cat", "the", "The", ""], ["cat", "a" * 60, "the"]]).reshape(-1, 50)
    unique, inverse = unique_rows(char_ids)
    assert torch.equal(unique[inverse], char_ids)
    assert len(unique) == len({tuple(row) for row in char_ids.tolist()}) == 6  # 5 words + the padding row
    assert inverse.dtype == torch.int64 and inverse.shape == (char_ids.shape[0],)
    empty_unique, empty_inverse = unique_rows(char_ids[:0])
    assert empty_unique.shape == (0, 50) and empty_inverse.shape == (0,)


def test_outputs_do_not_share_the_reused_gate_input_buffer(bilm):
    """Inference writes its input-to-gate products into reused buffers, lent to one thread at a
    time: a later call must not change an earlier call's outputs, and concurrent threads must not
    mix."""
    import threading

    long_batch = batch_to_ids(SENTENCES)
    short_batch = batch_to_ids([SENTENCES[1][:2]])
    with torch.no_grad():
        first, _ = bilm(long_batch)
        kept = first.clone()
        bilm(short_batch)
        assert torch.equal(first, kept)
        expected = {name: bilm(ids)[0] for name, ids in (("long", long_batch), ("short", short_batch))}

    results: dict[str, list[torch.Tensor]] = {"long": [], "short": []}

    def embed_repeatedly(name: str, ids: torch.Tensor) -> None:
        with torch.no_grad():
            for _ in range(20):
                results[name].append(bilm(ids)[0])

    threads = [
        threading.Thread(target=embed_repeatedly, args=item)
        for item in (("long", long_batch), ("short", short_batch))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, outputs in results.items():
        assert len(outputs) == 20 and all(torch.equal(output, expected[name]) for output in outputs), name


@pytest.mark.parametrize("n_rows", [1, 5, FEW_ROWS - 1])
def test_few_row_products_split_over_output_blocks_equal_the_linear_layer(n_rows, monkeypatch):
    layer = torch.nn.Linear(64, 96)
    inputs = torch.randn(n_rows, 64)
    with torch.no_grad():
        want = layer(inputs)
        monkeypatch.setattr(torch, "get_num_threads", lambda: 4)  # 8 blocks of 12 outputs
        monkeypatch.setattr(torch.nn.Linear, "forward", lambda *_: pytest.fail("took the unsplit path"))
        got = linear(layer, inputs)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)


def test_lstm_layer_gradients_over_ragged_rows_match_finite_differences():
    """The packed, split-by-step layer (rows finishing at different steps, clipping on) against
    central differences in float64, for its inputs, initial state and every weight."""
    torch.manual_seed(0)
    layer = ProjectedLSTMLayer(2, 3, 4, 2, cell_clip=0.8, proj_clip=0.6).double()
    with torch.no_grad():
        layer.bias.normal_(0.0, 0.3)
    inputs = torch.randn(2, 4, 5, 3, dtype=torch.float64, requires_grad=True)
    hidden = torch.randn(2, 4, 2, dtype=torch.float64).mul(0.3).requires_grad_()
    cell = torch.randn(2, 4, 4, dtype=torch.float64).mul(0.3).requires_grad_()
    batch_sizes = [4, 4, 3, 1, 1]  # row lengths 5, 3, 2, 2

    names = ("input_weight", "recurrent_weight", "bias", "projection_weight")

    def outputs_and_final_state(inputs, hidden, cell, *weights):
        for name, weight in zip(names, weights):
            setattr(layer, name, weight)
        outputs, (final_hidden, final_cell) = layer(inputs, batch_sizes, (hidden, cell))
        return outputs, final_hidden, final_cell

    weights = [
        getattr(layer, name).detach().clone().requires_grad_()
        for name in ("input_weight", "recurrent_weight", "bias", "projection_weight")
    ]
    for name in ("input_weight", "recurrent_weight", "bias", "projection_weight"):
        delattr(layer, name)
    assert torch.autograd.gradcheck(
        outputs_and_final_state, (inputs, hidden, cell, *weights), eps=1e-6, atol=1e-7
    )


def every_weight_copied(monkeypatch) -> products.WeightCopies:
    """Make every weight large enough for its copies and start from none."""
    monkeypatch.setattr(products, "PACKED_MIN_VALUES", 1)
    monkeypatch.setattr(products, "TRANSPOSED_MIN_VALUES", 1)
    copies = products.WeightCopies()
    monkeypatch.setattr(products, "WEIGHT_COPIES", copies)
    return copies


def no_weight_copied(monkeypatch) -> None:
    """Make every weight too small for a copy: the plain products."""
    monkeypatch.setattr(products, "PACKED_MIN_VALUES", 10**12)
    monkeypatch.setattr(products, "TRANSPOSED_MIN_VALUES", 10**12)


def count_packed_calls(monkeypatch) -> list[int]:
    """`every_weight_copied`, and count the calls of packed products (one entry per call, its row
    count)."""
    every_weight_copied(monkeypatch)
    calls: list[int] = []
    packed_linear = torch_probes.packed_linear

    def counting(weight):
        product = packed_linear(weight)
        if product is None:
            return None
        return lambda inputs, bias: calls.append(inputs.shape[0]) or product(inputs, bias)

    monkeypatch.setattr(torch_probes, "packed_linear", counting)
    return calls


def track_packed_copies(monkeypatch) -> list[weakref.ref]:
    """After `count_packed_calls`: a weak reference to every packed copy made from now on, so a
    test sees which copies exist (whatever else is in the registry) and which were freed."""
    made: list[weakref.ref] = []
    packing = torch_probes.packed_linear

    def tracking(weight):
        product = packing(weight)
        if product is not None:
            made.append(weakref.ref(product))
        return product

    monkeypatch.setattr(torch_probes, "packed_linear", tracking)
    return made


def copies_per_model(bilm: BiLM) -> int:
    """The packed copies a batch of `SENTENCES` makes: one per highway and the token projection,
    one per direction of each LSTM layer's input, recurrent and projection weights (D, K, O)."""
    encoder = bilm.token_encoder
    return len(encoder.highways) + 1 + sum(3 * layer.n_directions for layer in bilm.lstm.layers)


def weights_copied_per_model(bilm: BiLM) -> int:
    """The weights of `copies_per_model`'s packed copies: each highway, the token projection, each
    LSTM layer's input, recurrent and projection weights."""
    return len(bilm.token_encoder.highways) + 1 + 3 * len(bilm.lstm.layers)


def record_copied_products(monkeypatch, bilm: BiLM) -> list[tuple[str, str, int]]:
    """`every_weight_copied`, and record every product a copy serves: (kind, the weight's
    parameter name, row count)."""
    copies = every_weight_copied(monkeypatch)
    names = {id(parameter): name for name, parameter in bilm.named_parameters()}
    served: list[tuple[str, str, int]] = []
    packed, transposed = copies.packed, copies.transposed

    def recording_packed(weight: torch.Tensor, n_rows: int):
        found = packed(weight, n_rows)
        if found is not None:
            served.append(("packed", names[id(weight)], n_rows))
        return found

    def recording_transposed(weight: torch.Tensor):
        found = transposed(weight)
        if found is not None:
            served.append(("transposed", names[id(weight)], 1))
        return found

    monkeypatch.setattr(copies, "packed", recording_packed)
    monkeypatch.setattr(copies, "transposed", recording_transposed)
    return served


def alive(copies: list[weakref.ref]) -> int:
    """How many of the tracked packed copies are still held by anything."""
    gc.collect()
    return sum(copy() is not None for copy in copies)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
@needs_weight_copies
def test_products_on_weight_copies_equal_the_plain_products(bilm, monkeypatch):
    """One sentence: its highways, token projection and input products run on packed copies, its
    one-row steps on the plain recurrent product and the transposed projections. A batch: its steps
    of 2+ rows on packed copies too. The outputs equal the plain path's."""
    one_sentence, batch = batch_to_ids(SENTENCES[:1]), batch_to_ids(SENTENCES)
    with torch.no_grad():
        no_weight_copied(monkeypatch)
        want = [bilm(one_sentence)[0], bilm(batch)[0]]
        served = record_copied_products(monkeypatch, bilm)
        bilm.clear_token_cache()  # the token encoder runs again, on its copies
        got = [bilm(one_sentence)[0]]
        sentence_served = {(kind, name) for kind, name, _ in served}
        served.clear()
        bilm.clear_token_cache()
        got.append(bilm(batch)[0])
    layers = range(bilm.config.n_layers)
    encoder_weights = {"token_encoder.projection.weight"} | {
        f"token_encoder.highways.{index}.linear.weight" for index in range(bilm.config.n_highway)
    }
    sentence_packed = encoder_weights | {f"lstm.layers.{layer}.input_weight" for layer in layers}
    transposed = {("transposed", f"lstm.layers.{layer}.projection_weight") for layer in layers}
    assert sentence_served == {("packed", name) for name in sentence_packed} | transposed
    steps = {f"lstm.layers.{layer}.{name}_weight" for layer in layers for name in ("recurrent", "projection")}
    batch_served = {(kind, name) for kind, name, _ in served}
    assert batch_served == sentence_served | {("packed", name) for name in steps}
    step_rows = [rows for kind, name, rows in served if kind == "packed" and name in steps]
    assert all(PACKED_ROWS[0] <= rows <= len(SENTENCES) for rows in step_rows), served
    for got_layers, want_layers in zip(got, want):
        torch.testing.assert_close(got_layers, want_layers, atol=ATOL, rtol=0)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
def test_packed_weights_follow_weight_changes_and_stay_out_of_autograd(bilm, monkeypatch):
    batch = batch_to_ids(SENTENCES)
    calls = count_packed_calls(monkeypatch)
    with torch.no_grad():
        bilm(batch)
        for layer in bilm.lstm.layers:
            layer.recurrent_weight.mul_(0.5)
            layer.input_weight.add_(0.01)
            layer.projection_weight.mul_(0.9)  # the one-row steps' transposed copy
        bilm.token_encoder.highways[0].linear.weight.mul_(0.8)  # clears the token cache
        got = bilm(batch)[0]
        no_weight_copied(monkeypatch)  # the plain path, on the new weights
        want = bilm(batch)[0]
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    calls.clear()
    every_weight_copied(monkeypatch)
    bilm.train()
    bilm(batch)[0].sum().backward()
    assert calls == [], "a packed copy has no gradient: autograd must take the plain path"
    assert all(layer.recurrent_weight.grad is not None for layer in bilm.lstm.layers)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
def test_weight_copies_turned_off_make_no_copy_and_equal_outputs(bilm, monkeypatch):
    """`SPACY_ELMO_WEIGHT_COPIES=off` (a service that wants the memory back): every product runs
    plain, one sentence or a batch; `on` copies again; another value is named in the error."""
    inputs = [batch_to_ids(SENTENCES[:1]), batch_to_ids(SENTENCES)]
    with torch.no_grad():
        no_weight_copied(monkeypatch)
        want = [bilm(char_ids)[0] for char_ids in inputs]
    calls = count_packed_calls(monkeypatch)
    monkeypatch.setenv(products.COPIES_ENV, " OFF ")
    bilm.clear_token_cache()
    with torch.no_grad():
        got = [bilm(char_ids)[0] for char_ids in inputs]
    copies = products.WEIGHT_COPIES
    assert calls == [] and copies.count("packed") == copies.count("transposed") == 0
    for got_layers, want_layers in zip(got, want):
        torch.testing.assert_close(got_layers, want_layers, atol=ATOL, rtol=0)
    monkeypatch.setenv(products.COPIES_ENV, "on")
    bilm.clear_token_cache()
    with torch.no_grad():
        bilm(inputs[1])
    assert calls and copies.count("packed") == weights_copied_per_model(bilm)
    monkeypatch.setenv(products.COPIES_ENV, "no")
    with pytest.raises(ConfigError, match="SPACY_ELMO_WEIGHT_COPIES='no': use 'on'"), torch.no_grad():
        bilm(inputs[1])
    no_weight_copied(monkeypatch)  # a model too small for copies is told when it is built
    with pytest.raises(ConfigError, match="SPACY_ELMO_WEIGHT_COPIES='no'"):
        BiLM(bilm.config)


def test_without_onednn_the_lstm_takes_the_plain_products(bilm, monkeypatch):
    batch = batch_to_ids(SENTENCES)
    with torch.no_grad():
        want = bilm(batch)[0]
        calls = count_packed_calls(monkeypatch)
        monkeypatch.setattr(torch.ops, "mkldnn", object())  # a namespace with none of the ops
        got = bilm(batch)[0]
    assert calls == []
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    assert products.WEIGHT_COPIES.packed(bilm.lstm.layers[0].recurrent_weight, 8) is None


def _embed_in_forked_child(bilm: BiLM, char_ids: torch.Tensor, calls: list[int], results) -> None:
    """Puts the outputs (numpy) and how many packed products the child ran."""
    before = len(calls)
    with torch.no_grad():
        outputs = bilm(char_ids)[0].numpy()
    results.put((outputs, len(calls) - before))


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
@needs_weight_copies
def test_a_child_forked_while_the_packed_weights_are_locked_still_packs(bilm, monkeypatch):
    """Another thread of the parent may hold the packed weights' lock when spaCy forks its
    `n_process` workers: the child must not wait for it forever."""
    batch = batch_to_ids(SENTENCES)
    calls = count_packed_calls(monkeypatch)
    with torch.no_grad():
        want = bilm(batch)[0]
    # as if another thread were packing right now
    outputs, packed_in_child = forked_result(
        products.WEIGHT_COPIES._lock, _embed_in_forked_child, bilm, batch, calls
    )
    assert packed_in_child > 0
    torch.testing.assert_close(torch.from_numpy(outputs), want, atol=ATOL, rtol=0)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
@needs_weight_copies
def test_a_precision_change_drops_the_packed_copies_until_float32_needs_them(bilm, monkeypatch):
    """Timing "auto" packs the recurrent weights it times in float32; a plan that runs them in
    int8 must not keep 64 MB per weight of copies it never reads."""
    batch = batch_to_ids(SENTENCES)
    calls = count_packed_calls(monkeypatch)
    copies = track_packed_copies(monkeypatch)
    with torch.no_grad():
        bilm(batch)
    per_model = len(copies)
    assert per_model == copies_per_model(bilm) and alive(copies) == per_model and calls
    bilm.set_precision("int8")
    assert alive(copies) == 0
    calls.clear()
    with torch.no_grad():
        bilm(batch)
    assert len(copies) == per_model and alive(copies) == 0 and calls == []
    bilm.set_precision("fp32")
    with torch.no_grad():
        bilm(batch)
    assert len(copies) == 2 * per_model and alive(copies) == per_model and calls  # packed again


@needs_weight_copies
def test_packed_copies_go_with_their_model(bilm, monkeypatch):
    count_packed_calls(monkeypatch)
    copies = track_packed_copies(monkeypatch)
    model = BiLM(bilm.config)  # not the fixture, which pytest holds until the test ends
    with torch.no_grad():
        model(batch_to_ids(SENTENCES))
    assert alive(copies) == len(copies) == copies_per_model(model)
    del model
    assert alive(copies) == 0


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
@needs_weight_copies
def test_threads_share_the_packed_copies_and_get_their_own_outputs(bilm, monkeypatch):
    """spaCy users run pipelines from several threads: the copies are made once, under a lock,
    and read by all at once."""
    import threading

    batches = {"all": batch_to_ids(SENTENCES), "two": batch_to_ids(SENTENCES[:2])}
    with torch.no_grad():
        want = {name: bilm(ids)[0] for name, ids in batches.items()}
    calls = count_packed_calls(monkeypatch)
    copies = track_packed_copies(monkeypatch)
    bilm.clear_token_cache()  # the threads run the token encoder's products too
    got: dict[str, list[torch.Tensor]] = {name: [] for name in batches}

    def embed(name: str) -> None:
        with torch.no_grad():
            for _ in range(10):
                got[name].append(bilm(batches[name])[0])

    threads = [threading.Thread(target=embed, args=(name,)) for name in batches for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # each copy made once for all 4 threads, none dropped
    assert calls and alive(copies) == len(copies) == copies_per_model(bilm)
    for name, outputs in got.items():
        assert len(outputs) == 20
        for output in outputs:
            torch.testing.assert_close(output, want[name], atol=ATOL, rtol=0)
