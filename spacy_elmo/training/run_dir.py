"""The output directory of a pretraining run: refuse to mix runs, write the finished model, or the
model of one of its checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..bilm.config import BiLMConfig
from ..bilm.io.allennlp import ALLENNLP_OPTIONS_FILE, ALLENNLP_WEIGHTS_FILE
from ..bilm.io.atomic import atomic_write_text
from ..bilm.io.model_dir import (
    CONFIG_FILE,
    HEAD_FILE,
    TRAINING_CONFIG_FILE,
    VOCAB_FILE,
    WEIGHTS_FILE,
    write_softmax_head,
)
from ..bilm.io.state_dict import check_state_dict, state_dict_shapes
from ..bilm.lm_head import SoftmaxHead
from ..bilm.model import BiLM
from .checkpoint import CHECKPOINTS, STATE_FILE, latest_checkpoint, read_model_state
from .corpus import Vocabulary
from .errors import OutputDirError
from .metrics import METRICS_FILE
from .objective import LanguageModelObjective

PLOT_FILE = "perplexity.png"
ALLENNLP_DIR = "allennlp"
RUN_FILES = (
    CHECKPOINTS,
    CONFIG_FILE,
    WEIGHTS_FILE,
    HEAD_FILE,
    VOCAB_FILE,
    METRICS_FILE,
    PLOT_FILE,
    TRAINING_CONFIG_FILE,
    ALLENNLP_DIR,
)


def stopped_before_first_checkpoint(output_dir: Path) -> bool:
    """Whether `output_dir` holds only what a run writes before its first checkpoint (its config,
    vocabulary, the step-0 metrics): a run that failed or was stopped there, with nothing to resume."""
    names = {path.name for path in output_dir.iterdir()}
    return (
        TRAINING_CONFIG_FILE in names
        and names <= {TRAINING_CONFIG_FILE, VOCAB_FILE, METRICS_FILE, CHECKPOINTS}
        and latest_checkpoint(output_dir) is None
    )


def prepare_output_dir(output_dir: Path, model_config: BiLMConfig, *, resume: bool, force: bool) -> None:
    """Refuse to mix runs: resume only the same model; overwrite only with --force, or the files of
    a run that stopped before its first checkpoint."""
    if resume and force:
        raise OutputDirError("--resume and --force contradict each other: use one of them.")
    if output_dir.is_file():
        raise OutputDirError(f"The output directory {output_dir} is a file: give a directory path.")
    if resume:
        folder = latest_checkpoint(output_dir)
        if folder is None:
            raise OutputDirError(
                f"--resume: {output_dir} holds no checkpoint. Run without --resume to start."
            )
        saved = json.loads((folder / STATE_FILE).read_text(encoding="utf8"))["model"]
        if saved != model_config.to_allennlp_options():
            raise OutputDirError(
                f"--resume: the checkpoint in {output_dir} is of a different model than the config's "
                f"[model]. Use the run's own config (saved as {TRAINING_CONFIG_FILE} there), or --force "
                "to start over."
            )
        return
    if output_dir.exists() and any(output_dir.iterdir()):
        if not (force or stopped_before_first_checkpoint(output_dir)):
            what = "a model" if (output_dir / CONFIG_FILE).exists() else "files"
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
    write_softmax_head(output_dir, objective.head.state_dict())
    vocabulary.save(output_dir / VOCAB_FILE)
    objective.bilm.to_allennlp(
        output_dir / ALLENNLP_DIR / ALLENNLP_OPTIONS_FILE, output_dir / ALLENNLP_DIR / ALLENNLP_WEIGHTS_FILE
    )
    plot_perplexity(history, output_dir / PLOT_FILE)


def export_checkpoint(
    run_dir: Path, output_dir: Path, *, checkpoint: Path | None = None, force: bool = False
) -> int:
    """Write the model directory that the run would have written had it stopped at `checkpoint`
    (default: its latest); returns the checkpoint's step. The run itself is left as it is."""
    folder = checkpoint if checkpoint is not None else latest_checkpoint(run_dir)
    if folder is None:
        raise OutputDirError(
            f"{run_dir} holds no checkpoint ({CHECKPOINTS}/ is missing or empty): is it the output "
            "directory of `spacy-elmo pretrain` or `fine-tune`?"
        )
    if output_dir.resolve() == run_dir.resolve():
        raise OutputDirError(
            f"Export into a directory other than the run's own ({run_dir}): the run writes its model "
            "there itself when it finishes, and --force would delete its checkpoints."
        )
    if not (run_dir / VOCAB_FILE).is_file():
        raise OutputDirError(f"{run_dir} has no {VOCAB_FILE}: it is not the output directory of a run.")
    info, model_state = read_model_state(folder)
    model_config = BiLMConfig.from_allennlp_options(info["model"], source=str(folder / STATE_FILE))
    vocabulary = Vocabulary.load(run_dir / VOCAB_FILE)

    def build_objective() -> LanguageModelObjective:
        return LanguageModelObjective(
            BiLM(model_config), SoftmaxHead(len(vocabulary), model_config.projection_dim)
        )

    source = f"{folder / WEIGHTS_FILE} (with {run_dir / VOCAB_FILE})"
    check_state_dict(model_state, state_dict_shapes(build_objective), source)
    objective = build_objective()
    objective.load_state_dict(model_state)
    prepare_output_dir(output_dir, model_config, resume=False, force=force)
    if (run_dir / TRAINING_CONFIG_FILE).is_file():
        training_config = (run_dir / TRAINING_CONFIG_FILE).read_text(encoding="utf8")
        atomic_write_text(output_dir / TRAINING_CONFIG_FILE, training_config)
    write_outputs(output_dir, objective, vocabulary, info["counters"]["history"])
    return int(info["step"])
