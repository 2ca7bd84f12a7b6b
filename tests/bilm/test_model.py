"""BiLM outputs against the independent numpy ELMo, batching, statefulness and bad input."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, BiLMConfig, InputError, batch_to_ids

pytestmark = pytest.mark.numerics

ATOL = 1e-5
SENTENCES = [
    ["The", "bank", "raised", "rates", "near", "the", "river", "bank", "."],
    ["Hello"],
    ["a" * 60, "é" * 30, "😀", "<S>", "", "שלום", "\x07"],
    ["Short", "one", "."],
    ["Another", "sentence", "of", "medium", "length", "here", "."],
]


def test_every_layer_matches_the_numpy_reference(bilm, reference):
    for tokens, got in zip(SENTENCES, bilm.embed_sentences(SENTENCES, batch_size=2)):
        want, _ = reference.embed(tokens)
        assert got.dtype == np.float32 and got.shape == (3, len(tokens), 16)
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


def test_clipping_is_exercised_by_the_random_weights(bilm):
    layers, _ = bilm(batch_to_ids(SENTENCES))
    assert layers[1].abs().max().item() == pytest.approx(0.6)  # the projection clip


def test_layer_zero_is_the_token_layer_twice(bilm):
    layers, _ = bilm(batch_to_ids(SENTENCES))
    torch.testing.assert_close(layers[0, ..., :8], layers[0, ..., 8:], rtol=0, atol=0)


def test_padded_batch_equals_one_sentence_at_a_time(bilm):
    with torch.no_grad():
        batched, mask = bilm(batch_to_ids(SENTENCES))
        for row, tokens in enumerate(SENTENCES):
            alone, _ = bilm(batch_to_ids([tokens]))
            torch.testing.assert_close(batched[:, row, : len(tokens)], alone[:, 0], atol=ATOL, rtol=0)
            assert batched[:, row, len(tokens) :].eq(0).all()
            assert mask[row].sum() == len(tokens)


def test_stateless_calls_do_not_depend_on_call_order(bilm):
    first = bilm.embed_sentences(SENTENCES, batch_size=2)
    shuffled_order = [3, 0, 4, 2, 1]
    bilm.embed_sentences([SENTENCES[i] for i in reversed(shuffled_order)], batch_size=1)
    second = bilm.embed_sentences([SENTENCES[i] for i in shuffled_order], batch_size=3)
    for position, index in enumerate(shuffled_order):
        np.testing.assert_allclose(second[position], first[index], atol=ATOL, rtol=0)


def test_stateful_calls_match_a_hand_unrolled_computation(random_elmo_files, reference):
    bilm = BiLM.from_allennlp(*random_elmo_files, stateful=True)
    a, b, c, d, e, f, g, h, i = (SENTENCES[k % len(SENTENCES)][: 1 + k % 4] for k in range(9))

    def run(batch):
        with torch.no_grad():
            layers, _ = bilm(batch_to_ids(batch))
        return [layers[:, row, : len(tokens)].numpy() for row, tokens in enumerate(batch)]

    run([a, b])
    _, a_final = reference.embed(a)
    _, b_final = reference.embed(b)
    got = run([c, d, e])  # rows 0 and 1 continue from a and b, row 2 starts from zero
    want_c, c_final = reference.embed(c, a_final)
    want_d, d_final = reference.embed(d, b_final)
    want_e, e_final = reference.embed(e)
    for got_row, want_row in zip(got, (want_c, want_d, want_e)):
        np.testing.assert_allclose(got_row, want_row, atol=ATOL, rtol=0)
    run([f])  # a smaller batch: rows 1 and 2 keep the states of d and e
    _, f_final = reference.embed(f, c_final)
    got = run([g, h, i])
    for got_row, (tokens, state) in zip(got, ((g, f_final), (h, d_final), (i, e_final))):
        np.testing.assert_allclose(got_row, reference.embed(tokens, state)[0], atol=ATOL, rtol=0)
    bilm.reset_states()
    np.testing.assert_allclose(run([g])[0], reference.embed(g)[0], atol=ATOL, rtol=0)


def test_empty_sentences_give_empty_arrays_and_leave_others_alone(bilm):
    with_empty = bilm.embed_sentences([[], SENTENCES[0], []])
    assert with_empty[0].shape == (3, 0, 16) and with_empty[2].shape == (3, 0, 16)
    np.testing.assert_allclose(with_empty[1], bilm.embed_sentences([SENTENCES[0]])[0], atol=ATOL, rtol=0)
    assert bilm.embed_sentences([]) == []
    layers, mask = bilm(batch_to_ids([[], []]))
    assert layers.shape == (3, 2, 0, 16) and mask.shape == (2, 0)


def test_gradients_reach_the_token_encoder_and_both_stacks(bilm):
    layers, mask = bilm(batch_to_ids(SENTENCES[:2]))
    layers.sum().backward()
    gradient = bilm.token_encoder.char_embedding.grad
    assert gradient is not None and gradient.abs().sum() > 0
    for name, parameter in bilm.lstm.named_parameters():
        for direction in range(2):  # the weights of both directions are stacked on axis 0
            assert parameter.grad is not None and parameter.grad[direction].abs().sum() > 0, (name, direction)


def test_parameters_are_initialised_like_bilm_tf():
    bilm = BiLM(BiLMConfig(lstm_dim=16, projection_dim=4, filters=((1, 60), (2, 64)), n_highway=1))
    highway_bias = bilm.token_encoder.highways[0].linear.bias.detach()
    assert highway_bias[:124].eq(0).all() and highway_bias[124:].eq(-2).all()
    assert bilm.lstm.layers[0].bias.detach().eq(0).all()


def test_char_ids_with_a_hole_are_rejected(bilm):
    char_ids = batch_to_ids([["a", "b", "c"]])
    char_ids[0, 1] = 0
    with pytest.raises(InputError, match="Row 0 .* padding"):
        bilm(char_ids)


@pytest.mark.parametrize(
    "bad, message",
    [
        ([["a"]], "LongTensor of char ids"),
        (torch.zeros(2, 3, dtype=torch.long), "shape"),
        (torch.zeros(1, 2, 50), "integers"),
        (torch.full((1, 2, 50), 300), "0..261"),
    ],
)
def test_bad_char_id_tensors_get_clear_errors(bilm, bad, message):
    with pytest.raises(InputError, match=message):
        bilm(bad)


def test_embed_sentences_names_the_bad_token(bilm):
    with pytest.raises(InputError, match="Token 1 of sentence 1"):
        bilm.embed_sentences([["fine"], ["ok", b"bytes"]])


def test_kept_boundaries_wrap_the_tokens_and_match_the_reference(bilm, reference):
    with torch.no_grad():
        inner, _ = bilm(batch_to_ids(SENTENCES))
        wrapped, mask = bilm(batch_to_ids(SENTENCES), keep_sentence_boundaries=True)
    assert wrapped.shape[2] == inner.shape[2] + 2
    for row, tokens in enumerate(SENTENCES):
        assert mask[row].sum() == len(tokens) + 2
        torch.testing.assert_close(wrapped[:, row, 1 : len(tokens) + 1], inner[:, row, : len(tokens)])
        assert wrapped[:, row, len(tokens) + 2 :].eq(0).all()
    boundary_free, _ = reference.embed(SENTENCES[1])
    np.testing.assert_allclose(wrapped[:, 1, 1].numpy(), boundary_free[:, 0], atol=ATOL, rtol=0)


def test_state_dict_holds_one_tensor_per_direction_and_loads_back(bilm):
    """The layers stack both directions' weights; files and HDF5 keep bilm-tf's per-direction ones."""
    state = bilm.state_dict()
    assert not [key for key in state if key.startswith("lstm.")]
    for layer_index, layer in enumerate(bilm.lstm.layers):
        for direction, prefix in enumerate(("forward_lstm", "backward_lstm")):
            for name, parameter in layer.named_parameters():
                assert torch.equal(state[f"{prefix}.layers.{layer_index}.{name}"], parameter[direction])
    copy = BiLM(bilm.config)
    copy.load_state_dict(state)
    sentences = [["The", "cat", "sat", "."], ["Dogs", "bark"]]
    for got, want in zip(copy.embed_sentences(sentences), bilm.embed_sentences(sentences)):
        np.testing.assert_array_equal(got, want)


def test_loading_a_bilm_does_not_import_torch_compile_machinery():
    """Reading the shapes of a model's state dict builds it on the meta device; random init or
    `1.0 - tensor` there went through torch._refs and imported torch._dynamo: 2 s of every
    process's first load (each Ray worker's, each CLI run's)."""
    script = (
        "import sys\nfrom spacy_elmo.bundled import load_bundled_bilm\nload_bundled_bilm()\n"
        "print(sorted(name for name in sys.modules if name.startswith('torch._dynamo'))[:3])"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
