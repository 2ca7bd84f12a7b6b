"""Data-parallel pretraining with torchrun: 2 CPU processes (gloo) end with identical weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from spacy_elmo.bilm import BiLM

from .conftest import TINY_CONFIG

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("ddp_worker.py")


def test_two_process_torchrun_run_ends_with_identical_weights_on_both_ranks(tiny_corpus, tmp_path):
    train, dev = tiny_corpus
    output_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(WORKER),
         str(TINY_CONFIG), str(output_dir), "--paths.train", str(train), "--paths.dev", str(dev),
         "--training.max_steps", "12", "--training.eval_every", "6", "--training.checkpoint_every", "6"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rank0, rank1 = (load_file(str(tmp_path / f"rank{rank}.safetensors")) for rank in (0, 1))
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name
    torch.manual_seed(0)  # the config's seed: the weights training started from
    initial = BiLM(BiLM.load(output_dir).config).state_dict()
    assert all(not torch.equal(rank0[f"bilm.{name}"], tensor) for name, tensor in initial.items()), (
        "untrained"
    )
    # Rank 0 alone wrote the model, the metrics (tokens of both ranks) and a checkpoint of both ranks' data.
    records = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == [0, 6, 12] and records[-1]["tokens"] == 12 * 2 * 8 * 10
    state = json.loads((output_dir / "checkpoints" / "step-00000012" / "state.json").read_text())
    assert len(state["ranks"]) == 2 and state["ranks"][0] != state["ranks"][1]
    for name, tensor in BiLM.load(output_dir).state_dict().items():
        assert torch.equal(tensor, rank0[f"bilm.{name}"]), name
