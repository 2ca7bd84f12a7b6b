"""Run by `torchrun` in test_distributed.py: pretrain, then save this rank's weights for comparison."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from spacy_elmo.cli.overrides import parse_overrides
from spacy_elmo.training import load_pretrain_config, pretrain

if __name__ == "__main__":
    torch.set_num_threads(1)
    config_path, output_dir, *overrides = sys.argv[1:]
    config = load_pretrain_config(config_path, parse_overrides(list(overrides)))
    result = pretrain(config, Path(output_dir))
    weights = {name: tensor.contiguous() for name, tensor in result.objective.state_dict().items()}
    save_file(weights, str(Path(output_dir).parent / f"rank{os.environ['RANK']}.safetensors"))
