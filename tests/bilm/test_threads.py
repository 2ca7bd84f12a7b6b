"""One biLM called from many threads: its caches, buffers and packed weights stay consistent.

Threads run at torch's default thread count: these tests are about Python-level races, which
the interpreter's switch interval (shortened here) exposes, not about torch's own threads.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import batch_to_ids, products, torch_probes
from spacy_elmo.bilm.fork_safety import ForkSafeLock

from .forking import forked_result
from .test_fast_paths import ATOL, copies_per_model, count_packed_calls, weights_copied_per_model
from .test_model import SENTENCES
from .test_plans import BATCH


@pytest.fixture()
def frequent_switches() -> Iterator[None]:
    """Switch threads every microsecond instead of every 5 ms: a race window of a few bytecodes
    is then hit within a few hundred calls."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def run_threads(target: Callable[[int], None], n_threads: int) -> None:
    """Run `target(index)` in `n_threads` threads and re-raise the first error any of them hit."""
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            target(index)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if errors:
        raise errors[0]


def test_threads_evicting_each_others_token_vectors_get_their_own_outputs(bilm, frequent_switches) -> None:
    """A cache of 8 word types for 4 threads of 12 to 15 types each: every lookup races with
    another thread's eviction (on aa2396b, `get` then `move_to_end` raised KeyError)."""
    encoder, cache = bilm.token_encoder, bilm.token_cache
    char_ids = [batch_to_ids([BATCH[11 + index]]) for index in range(4)]
    with torch.no_grad():
        want = [encoder.encode_types(ids) for ids in char_ids]
    cache.max_entries = 8

    def encode(index: int) -> None:
        with torch.no_grad():
            for _ in range(300):
                got = encoder.encode_types(char_ids[index], cache)
                torch.testing.assert_close(got, want[index], atol=ATOL, rtol=0)

    run_threads(encode, 4)
    assert 0 < len(cache) <= 8


def test_gate_input_buffers_follow_the_calls_running_not_the_threads(bilm) -> None:
    """8 threads that each ran a batch and stay alive hold no buffer: at most
    `REUSED_BUFFERS.max_kept` are kept, for whichever thread calls next."""
    buffers = products.ReusedBuffers(max_kept=2)
    done, finish = threading.Barrier(9), threading.Event()
    want = bilm.embed_sentences(BATCH)
    got: dict[int, list] = {}

    def embed_and_stay(index: int) -> None:
        got[index] = bilm.embed_sentences(BATCH[index:] + BATCH[:index])
        done.wait(timeout=120)
        finish.wait(timeout=120)

    pool = threading.Thread(target=run_threads, args=(embed_and_stay, 8))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(products, "REUSED_BUFFERS", buffers)
        patch.setattr("spacy_elmo.bilm.lstm.REUSED_BUFFERS", buffers)
        pool.start()
        done.wait(timeout=120)
        assert len(buffers) <= buffers.max_kept and buffers.take((1,), torch.zeros(1)) is None
        finish.set()
        pool.join(timeout=120)
    for index, layers in got.items():
        for got_layers, want_layers in zip(layers, want[index:] + want[:index]):
            torch.testing.assert_close(
                torch.from_numpy(got_layers), torch.from_numpy(want_layers), atol=ATOL, rtol=0
            )


def test_a_lent_buffer_is_taken_by_no_one_else_until_its_scope_ends() -> None:
    buffers = products.ReusedBuffers(max_kept=1)
    like = torch.zeros(1)
    with buffers.scope():
        first = buffers.take((4, 8), like)
        with buffers.scope():
            inner = buffers.take((2, 8), like)
        assert inner.data_ptr() != first.data_ptr()  # the inner one went back, the first is lent
        again = buffers.take((2, 8), like)
        assert again.data_ptr() == inner.data_ptr()  # reused: it fits
    assert len(buffers) == 1  # the larger of the two given back
    with buffers.scope():
        assert buffers.take((4, 8), like).numel() == 32 and len(buffers) == 0


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
def test_a_weight_that_cannot_be_packed_leaves_the_others_packed_and_says_so(
    bilm, monkeypatch, caplog
) -> None:
    """oneDNN refuses the first weight it is asked to pack (the first highway's): the others are
    packed all the same, the highway is not asked again, and a warning says so once. On aa2396b
    one refusal turned packing off for the whole process, silently."""
    batch = batch_to_ids(SENTENCES)
    with torch.no_grad():
        want = bilm(batch)[0]
    bilm.clear_token_cache()  # the encoder runs again, on its copies
    calls = count_packed_calls(monkeypatch)
    counting, attempts = torch_probes.packed_linear, []

    def refuse_the_first(weight: torch.Tensor) -> torch_probes.PackedLinear | None:
        attempts.append(weight.shape)
        return None if len(attempts) == 1 else counting(weight)

    monkeypatch.setattr(torch_probes, "packed_linear", refuse_the_first)
    with caplog.at_level(logging.WARNING, logger="spacy_elmo.bilm.products"), torch.no_grad():
        got = [bilm(batch)[0] for _ in range(3)]
    assert calls and products.WEIGHT_COPIES.count("packed") == weights_copied_per_model(bilm) - 1
    assert len(attempts) == copies_per_model(bilm)  # each direction once: no retry per call
    assert caplog.text.count("could not pack") == 1
    for layers in got:
        torch.testing.assert_close(layers, want, atol=ATOL, rtol=0)


def _embed_in_child(bilm, results) -> None:
    results.put(bilm.embed_sentences(SENTENCES))


def test_a_child_forked_while_another_thread_holds_the_caches_locks_still_embeds(bilm) -> None:
    """spaCy forks its `n_process` workers from a parent whose other threads may be inside the
    token cache or taking a gate buffer at that moment: the child must not wait for their locks."""
    want = bilm.embed_sentences(SENTENCES)
    bilm.clear_token_cache()
    held = contextlib.ExitStack()  # as if another thread held both
    held.enter_context(bilm.token_cache._lock)
    held.enter_context(products.REUSED_BUFFERS._lock)
    got = forked_result(held, _embed_in_child, bilm)
    for got_layers, want_layers in zip(got, want):
        torch.testing.assert_close(
            torch.from_numpy(got_layers), torch.from_numpy(want_layers), atol=ATOL, rtol=0
        )


def _acquire_in_child(lock: ForkSafeLock, results) -> None:
    results.put(lock._lock.acquire(timeout=5))


def test_a_fork_safe_lock_is_released_in_a_forked_child_and_in_a_copy() -> None:
    """The caches, weight copies, gate buffers and the bundled-model load share this one lock type."""
    import copy
    import pickle

    lock = ForkSafeLock()
    with lock:
        for duplicate in (copy.deepcopy(lock), pickle.loads(pickle.dumps(lock))):
            assert duplicate is not lock and not duplicate.locked()
    assert forked_result(lock, _acquire_in_child, lock) is True


def test_a_model_with_a_filled_token_cache_pickles_and_deep_copies(bilm) -> None:
    """Workers get the model pickled (spawned processes, Ray actors) and spaCy's
    `replace_listeners` deep-copies it: the cache's lock stays behind, each copy gets its own."""
    import copy
    import pickle

    want = bilm.embed_sentences(SENTENCES)
    for duplicate in (pickle.loads(pickle.dumps(bilm)), copy.deepcopy(bilm)):
        assert len(duplicate.token_cache) == len(bilm.token_cache) > 0
        assert duplicate.token_cache._lock is not bilm.token_cache._lock
        for got_layers, want_layers in zip(duplicate.embed_sentences(SENTENCES), want):
            np.testing.assert_array_equal(got_layers, want_layers)
