"""The caller's torch thread count after `nlp.pipe`: the thread policy may run the biLM's batches
at any count, but hands the calling thread its own count back, between the docs a generator
yields, after the call and after a batch that raised. Run as a user's program runs: a fresh
interpreter with torch's default count, and a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ..bilm.test_thread_policy import user_environment

SCRIPT = textwrap.dedent(
    """
    import json, os
    import spacy, torch
    from spacy_elmo.bilm.threads import THREAD_POLICY
    from spacy_elmo.pipeline.layers import get_bilm

    # One CPU allowed: the policy's budget is 1 while torch's default counts every core, so its
    # batches run at 1 thread, as they do when CPU-bound processes beside it take the cores.
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    callers = torch.get_num_threads()
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    nlp.initialize()
    texts = ["A short text.", "Another one."] * 4
    between_docs = [torch.get_num_threads() for _ in nlp.pipe(texts, batch_size=2)]
    after_pipe = torch.get_num_threads()

    def a_users_hook_that_raises(module, inputs):
        raise RuntimeError("a user's hook")

    get_bilm(nlp.get_pipe("elmo").model).lstm.register_forward_pre_hook(a_users_hook_that_raises)
    try:
        nlp("A text whose batch raises.")
        raise AssertionError("the hook did not raise")
    except RuntimeError as error:
        assert "a user's hook" in str(error), error
    print(json.dumps({
        "callers": callers,
        "between_docs": between_docs,
        "after_pipe": after_pipe,
        "after_an_error": torch.get_num_threads(),
        "batches_at": THREAD_POLICY.chooser().batches_at,
    }))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs an affinity mask to narrow and at least 2 CPUs",
)
def test_nlp_pipe_gives_the_calling_thread_its_thread_count_back() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240, env=user_environment()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    callers = seen["callers"]
    assert callers > 1 and list(seen["batches_at"]) == ["1"]  # the policy did run at another count
    assert seen["between_docs"] == [callers] * 8
    assert seen["after_pipe"] == callers
    assert seen["after_an_error"] == callers
