"""Atomic training checkpoints without pickle: safetensors for tensors, JSON for everything else.

A checkpoint is a folder `checkpoints/step-NNNNNNNN/` holding
- `model.safetensors` (the name the model directory gives its weights): the biLM (`bilm.*`) and
  the softmax head (`head.*`);
- `optimizer.safetensors`: the optimizer's per-parameter state tensors (`state.<i>.<name>`);
- `ranks.safetensors`: per rank, the carried LSTM states and the torch and sampler RNG states;
- `state.json`: step, counters, the optimizer's param groups and each rank's data position.
The folder is complete before `checkpoints/latest.json` (written atomically) points at it, so a
run killed at any moment resumes from the last complete checkpoint.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from ..bilm.io.atomic import atomic_save_tensors, atomic_write_text
from ..bilm.io.model_dir import WEIGHTS_FILE
from .errors import OutputDirError

CHECKPOINTS = "checkpoints"
LATEST = "latest.json"
STATE_FILE = "state.json"
OPTIMIZER_FILE = "optimizer.safetensors"
RANKS_FILE = "ranks.safetensors"


@dataclass
class RankState:
    """What each process needs beyond the shared weights to continue exactly."""

    data: dict[str, Any]  # SentenceStream + WindowBatcher positions (JSON)
    tensors: dict[str, torch.Tensor]  # carried LSTM states, RNG states


def save_checkpoint(
    output_dir: Path,
    step: int,
    model_state: dict[str, torch.Tensor],
    optimizer: torch.optim.Optimizer,
    ranks: list[RankState],
    info: dict[str, Any],
) -> Path:
    """Write the checkpoint of `step`, point `latest.json` at it, then delete older ones."""
    root = output_dir / CHECKPOINTS
    folder = root / f"step-{step:08d}"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_save_tensors(folder / WEIGHTS_FILE, model_state)
    optimizer_state = optimizer.state_dict()
    optimizer_tensors: dict[str, torch.Tensor] = {}
    optimizer_scalars: dict[str, Any] = {}
    for index, parameter_state in optimizer_state["state"].items():
        for name, value in parameter_state.items():
            if isinstance(value, torch.Tensor):
                optimizer_tensors[f"state.{index}.{name}"] = value
            else:
                optimizer_scalars[f"state.{index}.{name}"] = value
    atomic_save_tensors(folder / OPTIMIZER_FILE, optimizer_tensors)
    atomic_save_tensors(
        folder / RANKS_FILE,
        {
            f"rank{rank}.{name}": tensor
            for rank, state in enumerate(ranks)
            for name, tensor in state.tensors.items()
        },
    )
    document = {
        **info,
        "step": step,
        "optimizer_param_groups": optimizer_state["param_groups"],
        "optimizer_scalars": optimizer_scalars,
        "ranks": [state.data for state in ranks],
    }
    atomic_write_text(folder / STATE_FILE, json.dumps(document) + "\n")
    atomic_write_text(root / LATEST, json.dumps({"step": step, "folder": folder.name}) + "\n")
    for older in root.glob("step-*"):
        if older != folder:
            shutil.rmtree(older, ignore_errors=True)
    return folder


def latest_checkpoint(output_dir: Path) -> Path | None:
    pointer = output_dir / CHECKPOINTS / LATEST
    if not pointer.is_file():
        return None
    folder = output_dir / CHECKPOINTS / json.loads(pointer.read_text(encoding="utf8"))["folder"]
    if not (folder / STATE_FILE).is_file():
        raise OutputDirError(f"{pointer} points at {folder}, which is incomplete. Start over with --force.")
    return folder


@dataclass
class LoadedCheckpoint:
    info: dict[str, Any]
    model_state: dict[str, torch.Tensor]
    ranks: list[RankState]


def read_model_state(folder: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """A checkpoint's `state.json` and its model tensors (`bilm.*`, `head.*`), without the optimizer."""
    missing = [name for name in (STATE_FILE, WEIGHTS_FILE) if not (folder / name).is_file()]
    if missing:
        raise OutputDirError(
            f"{folder} is not a complete checkpoint: it has no {missing[0]}. Checkpoints are the folders "
            f"{CHECKPOINTS}/step-NNNNNNNN of a pretraining run's output directory."
        )
    info = json.loads((folder / STATE_FILE).read_text(encoding="utf8"))
    return info, load_file(str(folder / WEIGHTS_FILE))


def load_checkpoint(folder: Path, optimizer: torch.optim.Optimizer) -> LoadedCheckpoint:
    """Read a checkpoint folder and restore `optimizer` (built over the same parameters) in place."""
    info, model_state = read_model_state(folder)
    optimizer_tensors = load_file(str(folder / OPTIMIZER_FILE))
    per_parameter: dict[int, dict[str, Any]] = {}
    for key, value in [*optimizer_tensors.items(), *info["optimizer_scalars"].items()]:
        _, index, name = key.split(".", 2)
        per_parameter.setdefault(int(index), {})[name] = value
    _check_state_shapes(folder, optimizer, per_parameter)
    optimizer.load_state_dict({"state": per_parameter, "param_groups": info["optimizer_param_groups"]})
    rank_tensors = load_file(str(folder / RANKS_FILE))
    ranks = []
    for rank, data in enumerate(info["ranks"]):
        prefix = f"rank{rank}."
        tensors = {
            name[len(prefix) :]: value for name, value in rank_tensors.items() if name.startswith(prefix)
        }
        ranks.append(RankState(data, tensors))
    return LoadedCheckpoint(info, model_state, ranks)


def _check_state_shapes(
    folder: Path, optimizer: torch.optim.Optimizer, per_parameter: dict[int, dict[str, Any]]
) -> None:
    """Refuse optimizer state that does not fit the parameters (`load_state_dict` does not check,
    and the next step would fail deep inside torch)."""
    parameters = [parameter for group in optimizer.param_groups for parameter in group["params"]]
    for index, parameter_state in per_parameter.items():
        for name, value in parameter_state.items():
            if not isinstance(value, torch.Tensor) or value.dim() == 0:
                continue
            shape = tuple(parameters[index].shape) if index < len(parameters) else None
            if tuple(value.shape) != shape:
                raise OutputDirError(
                    f"The optimizer state '{name}' of parameter {index} in {folder} has shape "
                    f"{tuple(value.shape)}, but this model's parameter {index} has shape {shape}. The "
                    "checkpoint was written for another model or by a spacy-elmo version with another "
                    "weight layout: resume it with the version that wrote it, or start over with --force."
                )
