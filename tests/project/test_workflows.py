"""The project's workflows: each one's grid keeps its runs apart and its report reads them."""

from __future__ import annotations

import shlex

import srsly
from thinc.api import Config

from tests.conftest import REPO_ROOT

PROJECT = srsly.read_yaml(REPO_ROOT / "project" / "project.yml")
COMMANDS = {command["name"]: command for command in PROJECT["commands"]}


def option(words: list[str], name: str, default: str) -> str:
    return words[words.index(name) + 1] if name in words else default


def grid_and_report_dirs(workflow: str) -> tuple[tuple[str, str], str]:
    """((training dir, metrics dir) of the workflow's grid run, the metrics dir its report reads)."""
    steps = [
        shlex.split(line) for name in PROJECT["workflows"][workflow] for line in COMMANDS[name]["script"]
    ]
    grids = [words for words in steps if words[:2] == ["python", "scripts/grid.py"]]
    (report,) = [words for words in steps if words[:2] == ["python", "scripts/report.py"]]
    dirs = {
        (option(grid, "--training-dir", "training"), option(grid, "--metrics-dir", "metrics"))
        for grid in grids
    }
    assert len(dirs) == 1, f"{workflow}: its grid lines write to different folders: {dirs}"
    return dirs.pop(), report[2]


def test_each_workflow_trains_and_reports_in_its_own_folders():
    """A run whose metrics file exists is skipped, so two workflows sharing a folder would mix
    their runs (another biLM, other step counts) in one report without a word."""
    workflows = list(PROJECT["workflows"])
    assert {"all", "seeds", "full", "smoke"} <= set(workflows)
    folders = {workflow: grid_and_report_dirs(workflow) for workflow in workflows}
    training_dirs = [training for (training, _), _ in folders.values()]
    metrics_dirs = [metrics for (_, metrics), _ in folders.values()]
    assert len(set(training_dirs)) == len(training_dirs), folders
    assert len(set(metrics_dirs)) == len(metrics_dirs), folders
    for (_, metrics), reported in folders.values():
        assert reported.rstrip("/") == metrics, folders


def test_one_spacy_pretrain_serves_both_tasks_because_their_tok2vecs_are_the_same():
    """`pretrain-cnn` pretrains the NER config's CNN once and the grid loads it for both tasks;
    that is only right while the two configs' tok2vec components and pretraining are identical."""
    configs = [Config().from_disk(REPO_ROOT / "configs" / f"{task}_cnn.cfg") for task in ("ner", "parser")]
    assert configs[0]["components"]["tok2vec"] == configs[1]["components"]["tok2vec"]
    assert configs[0].get("pretraining") == configs[1].get("pretraining")
    (pretrain,) = [line for line in COMMANDS["pretrain-cnn"]["script"] if "spacy pretrain" in line]
    weights = shlex.split(pretrain)[5] + "/model-last.bin"
    for command in ("grid-full", "grid-seeds"):
        grid = shlex.split(COMMANDS[command]["script"][0])
        assert option(grid, "--pretrained-tok2vec", "") == weights, command


def bilm_command(name: str) -> list[str]:
    """The words of a command's `spacy_elmo pretrain` or `fine-tune` line: `pretrain` CONFIG OUTPUT
    at [4] and [5]; `fine-tune` START CONFIG OUTPUT at [4], [5] and [6]."""
    (line,) = [
        line
        for line in COMMANDS[name]["script"]
        if "-m spacy_elmo pretrain" in line or "-m spacy_elmo fine-tune" in line
    ]
    return shlex.split(line)


def test_each_pretraining_stage_of_the_full_workflow_starts_from_the_last_ones_model():
    full = PROJECT["workflows"]["full"]
    stages = ("pretrain-bilm", "continue-bilm", "anneal-bilm", "finetune-bilm")
    assert [full.index(stage) for stage in stages] == sorted(full.index(stage) for stage in stages)
    pretrained, continued, annealed = (bilm_command(stage) for stage in stages[:3])
    assert continued[4] == pretrained[5], "continue-bilm must start from pretrain-bilm's model"
    assert annealed[4] == continued[6], "anneal-bilm must start from continue-bilm's model"
    finetuned = bilm_command("finetune-bilm")
    assert finetuned[4] == annealed[6], "finetune-bilm must start from anneal-bilm's model"
    assert option(continued, "--paths.train", "") == option(pretrained, "--paths.train", "")
    assert option(annealed, "--paths.train", "") == option(pretrained, "--paths.train", "")


def test_hours_long_pretraining_commands_never_overwrite_a_run():
    """Rerunning an interrupted step must not delete its checkpoints: without --force the CLI
    refuses and says to pass --resume."""
    for name in ("pretrain-bilm", "continue-bilm", "anneal-bilm"):
        assert "--force" not in bilm_command(name), name
