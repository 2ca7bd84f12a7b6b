"""Exact fp32 speed of this checkout against another git revision, side by side.

    python bench/bench_revisions.py e6ba048                  # original and small, batch 1 and 64
    python bench/bench_revisions.py HEAD~3 --cells original:1:8 --rounds 5

A change to the biLM's kernels cannot be timed against its own code in one process, so the two
revisions run in turns: round by round, one process of the other revision (a temporary `git
worktree` of it) and one of this checkout (each first in every other round), each loading the same
random weights in a preset's shape and embedding UD EWT dev sentences with an empty type cache
(best of 2 timed runs after one warm-up, torch fixed at `--threads`). Prints each round's tokens/s
and, per cell, the median over rounds of this checkout / the revision.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPOSITORY = BENCH.parent
DEFAULT_CELLS = ("original:1:8", "original:64:64", "small:1:24", "small:64:256")
"""config:batch size:sentences."""


def measure(cells: list[str], threads: int) -> dict[str, float]:
    """Tokens/s of each cell in this process (the revision on `sys.path` first)."""
    sys.path.insert(0, str(BENCH))
    import torch
    from bench_bilm import EWT_DEV, read_conllu_sentences
    from machine import fix_threads

    import spacy_elmo
    from spacy_elmo.bilm import PRESETS, BiLM

    print(f"spacy_elmo from {Path(spacy_elmo.__file__).parent.parent}", file=sys.stderr)
    fix_threads(threads)
    speeds: dict[str, float] = {}
    for cell in cells:
        config, batch_size, n_sentences = cell.split(":")
        torch.manual_seed(0)
        bilm = BiLM(PRESETS[config]).eval()
        sentences = read_conllu_sentences(EWT_DEV, int(n_sentences))
        n_tokens = sum(len(sentence) for sentence in sentences)
        seconds = []
        for _ in range(3):  # the first run warms up
            bilm.clear_token_cache()
            start = time.perf_counter()
            bilm.embed_sentences(sentences, batch_size=int(batch_size))
            seconds.append(time.perf_counter() - start)
        speeds[cell] = n_tokens / min(seconds[1:])
    return speeds


def run_side(checkout: Path, cells: list[str], threads: int) -> dict[str, float]:
    """`measure` in a fresh process that imports `spacy_elmo` from `checkout`."""
    command = [sys.executable, __file__, "--measure", *cells, "--threads", str(threads)]
    environment = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(checkout), os.environ.get("PYTHONPATH", "")])
    )
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if completed.returncode:
        raise SystemExit(f"the run in {checkout} failed:\n{completed.stderr}")
    if f"spacy_elmo from {checkout}" not in completed.stderr:
        raise SystemExit(f"the run meant for {checkout} imported another spacy_elmo:\n{completed.stderr}")
    return json.loads(completed.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("revision", nargs="?", help="the git revision to compare this checkout with")
    parser.add_argument("--cells", nargs="+", default=list(DEFAULT_CELLS), help="config:batch:sentences")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--measure", nargs="+", help=argparse.SUPPRESS)  # a side's own process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.threads)))
        return
    if not args.revision:
        parser.error("give the git revision to compare with")
    sys.path.insert(0, str(BENCH))
    from machine import machine_line

    print(f"{machine_line(args.threads)}; this checkout against {args.revision}, exact fp32")
    with tempfile.TemporaryDirectory() as folder:
        baseline = Path(folder) / "baseline"
        subprocess.run(
            ["git", "-C", str(REPOSITORY), "worktree", "add", "--detach", str(baseline), args.revision],
            check=True,
            capture_output=True,
        )
        try:
            rounds = []
            for number in range(1, args.rounds + 1):
                order = [("revision", baseline), ("this", REPOSITORY)]
                if number % 2 == 0:  # each side goes first in every other round
                    order.reverse()
                sides = {name: run_side(path, args.cells, args.threads) for name, path in order}
                rounds.append(sides)
                load = os.getloadavg()[0]
                cells = " | ".join(
                    f"{cell} {sides['revision'][cell]:,.0f} -> {sides['this'][cell]:,.0f}"
                    for cell in args.cells
                )
                print(f"round {number} (load average {load:.2f}): {cells}", flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(REPOSITORY), "worktree", "remove", "--force", str(baseline)], check=False
            )
    print("\n| config:batch:sentences | revision tokens/s (median) | this checkout | this / revision |")
    print("|---|---|---|---|")
    for cell in args.cells:
        before = statistics.median(sides["revision"][cell] for sides in rounds)
        after = statistics.median(sides["this"][cell] for sides in rounds)
        ratio = statistics.median(sides["this"][cell] / sides["revision"][cell] for sides in rounds)
        print(f"| {cell} | {before:,.0f} | {after:,.0f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
