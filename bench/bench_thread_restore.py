"""What handing the caller's thread count back costs per biLM batch.

    python bench/bench_thread_restore.py --batch-sizes 1 8 64 --batches 100 --rounds 5

The process allows itself one CPU (its affinity mask), so the thread policy's budget is one
thread while the caller's count stays torch's default: every batch of the bundled biLM then runs
at 1 thread, in two ways taken in turn, round after round:

- `fixed at 1`: the caller set `torch.set_num_threads(1)` and `SPACY_ELMO_THREADS=fixed`; no
  count changes hands;
- `policy`: the caller keeps torch's default count; the policy sets 1 thread for each batch and
  gives the caller's count back after it.

It prints the best time per batch of each over `--rounds` rounds and `policy / fixed at 1`:
what setting and restoring the count costs a batch, all in all. It needs at least 2 CPUs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine_line  # noqa: E402

from spacy_elmo.bilm import batch_to_ids  # noqa: E402
from spacy_elmo.bilm.threads import POLICY_ENV, THREAD_POLICY  # noqa: E402
from spacy_elmo.bundled import load_bundled_bilm  # noqa: E402

SENTENCE = "The bank raised its rates as the river bank flooded .".split()


def seconds_per_batch(bilm: torch.nn.Module, char_ids: torch.Tensor, batches: int, *, policy: bool) -> float:
    """Mean seconds of one of `batches` batches, run by the policy or at a fixed 1 thread."""
    callers_count = torch.get_num_threads()
    os.environ[POLICY_ENV] = "adaptive" if policy else "fixed"
    if not policy:
        torch.set_num_threads(1)
    try:
        start = time.perf_counter()
        for _ in range(batches):
            bilm(char_ids)
        return (time.perf_counter() - start) / batches
    finally:
        torch.set_num_threads(callers_count)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--batches", type=int, default=100, help="batches per round and way")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    callers_count = torch.get_num_threads()
    if callers_count < 2 or len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs at least 2 CPUs: with one, the policy never changes the count")
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    bilm = load_bundled_bilm()
    print(f"{machine_line(callers_count)}; the process pinned to 1 CPU; bundled biLM, 10-token sentences")
    print()
    print("| batch | fixed at 1: ms per batch | policy: ms per batch | policy / fixed at 1 |")
    print("|---|---|---|---|")
    with torch.no_grad():
        for batch_size in args.batch_sizes:
            char_ids = batch_to_ids([SENTENCE] * batch_size)
            best = {"fixed": float("inf"), "policy": float("inf")}
            for _ in range(args.rounds):
                for way in best:
                    best[way] = min(
                        best[way], seconds_per_batch(bilm, char_ids, args.batches, policy=way == "policy")
                    )
            print(
                f"| {batch_size} | {best['fixed'] * 1e3:.3f} | {best['policy'] * 1e3:.3f} "
                f"| {best['policy'] / best['fixed']:.3f} |"
            )
    chooser = THREAD_POLICY.chooser()
    assert chooser is not None and set(chooser.batches_at) == {1}, "the policy did not run at 1 thread"
    assert torch.get_num_threads() == callers_count, "the caller's count was not given back"


if __name__ == "__main__":
    main()
