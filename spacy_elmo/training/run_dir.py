"""The output directory of a pretraining run: refuse to mix runs, write the finished model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..bilm.config import BiLMConfig
from .checkpoint import CHECKPOINTS, latest_checkpoint, save_tensors
from .corpus import Vocabulary
from .errors import OutputDirError
from .evaluate import HEAD_FILE, VOCAB_FILE
from .metrics import METRICS_FILE
from .objective import LanguageModelObjective

PLOT_FILE = "perplexity.png"
CONFIG_FILE = "training.cfg"
ALLENNLP_DIR = "allennlp"
RUN_FILES = (
    CHECKPOINTS,
    "config.json",
    "model.safetensors",
    HEAD_FILE,
    VOCAB_FILE,
    METRICS_FILE,
    PLOT_FILE,
    CONFIG_FILE,
    ALLENNLP_DIR,
)


def prepare_output_dir(output_dir: Path, model_config: BiLMConfig, *, resume: bool, force: bool) -> None:
    """Refuse to mix runs: resume only the same model; overwrite only with --force."""
    if resume and force:
        raise OutputDirError("--resume and --force contradict each other: use one of them.")
    if resume:
        folder = latest_checkpoint(output_dir)
        if folder is None:
            raise OutputDirError(
                f"--resume: {output_dir} holds no checkpoint. Run without --resume to start."
            )
        saved = json.loads((folder / "state.json").read_text(encoding="utf8"))["model"]
        if saved != model_config.to_allennlp_options():
            raise OutputDirError(
                f"--resume: the checkpoint in {output_dir} is of a different model than the config's "
                "[model]. Use the run's own config (saved as training.cfg there), or --force to start over."
            )
        return
    if output_dir.exists() and any(output_dir.iterdir()):
        if not force:
            what = "a model" if (output_dir / "config.json").exists() else "files"
            raise OutputDirError(
                f"The output directory {output_dir} already holds {what}. Pass --resume to continue the "
                "run saved there, --force to overwrite it, or choose another directory."
            )
        for name in RUN_FILES:
            path = output_dir / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    output_dir.mkdir(parents=True, exist_ok=True)


def write_outputs(
    output_dir: Path, objective: LanguageModelObjective, vocabulary: Vocabulary, history: list[dict[str, Any]]
) -> None:
    """The model directory (`BiLM.load` reads it), its softmax head, AllenNLP export, plot."""
    from .plot import plot_perplexity

    objective.bilm.save(output_dir)
    save_tensors(output_dir / HEAD_FILE, objective.head.state_dict())
    vocabulary.save(output_dir / VOCAB_FILE)
    objective.bilm.to_allennlp(
        output_dir / ALLENNLP_DIR / "options.json", output_dir / ALLENNLP_DIR / "weights.hdf5"
    )
    plot_perplexity(history, output_dir / PLOT_FILE)
