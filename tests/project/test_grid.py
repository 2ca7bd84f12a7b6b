"""The project's grid runner: which config and overrides each system of the comparison trains with."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import platform
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import spacy
import torch
from spacy.util import load_config

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "project" / "scripts"))
grid = importlib.import_module("grid")


def arguments(**changes) -> argparse.Namespace:
    values = {
        "corpus_dir": Path("corpus"),
        "training_dir": Path("training"),
        "max_steps": 100,
        "eval_frequency": 50,
        "bilm": "",
        "bilm_for": {},
        "pretrained_tok2vec": "",
        "jobs": 1,
        "threads_per_run": 0,
        "ood_test": {},
    }
    return argparse.Namespace(**{**values, **changes})


def overrides_of(command: list[str]) -> dict[str, str]:
    options = command[command.index("--output") :]
    return dict(zip(options[::2], options[1::2]))


def test_elmo_alone_drops_the_hash_embeddings_and_the_config_accepts_it():
    command = grid.train_command(arguments(), "parser", "elmo", 0.1, 2)
    options = overrides_of(command)
    assert options["--components.parser.model.tok2vec.embed.embed"] == "null"
    assert options["--paths.train"] == str(Path("corpus/train-0.1.spacy"))
    assert options["--system.seed"] == "2"
    assert options["--output"] == str(Path("training/parser__elmo__0.1__seed2"))
    assert "--paths.elmo" not in options  # the bundled biLM
    config = load_config(Path(command[4]), overrides={"components.parser.model.tok2vec.embed.embed": None})
    embed = config["components"]["parser"]["model"]["tok2vec"]["embed"]
    assert embed["embed"] is None and embed["elmo"]["@architectures"] == "spacy-elmo.ElmoListener.v1"


def test_elmo_with_hash_embeddings_keeps_them_and_takes_the_given_bilm():
    options = overrides_of(grid.train_command(arguments(bilm="models/bilm-ewt"), "ner", "elmo_hash", 1.0, 0))
    assert not any(key.endswith(".embed.embed") for key in options)
    assert options["--paths.elmo"] == "models/bilm-ewt"


def test_bilm_for_gives_one_tasks_runs_of_one_system_another_bilm():
    args = arguments(bilm="models/bilm-ewt", bilm_for=dict([grid.parse_bilm_for("ner:elmo_hash=bundled")]))
    assert "--paths.elmo" not in overrides_of(grid.train_command(args, "ner", "elmo_hash", 1.0, 0))
    assert grid.run_record(args, "ner", "elmo_hash", 1.0, 0)["bilm"]["path"].startswith("bundled en_elmo_cpu")
    for task, system in [("parser", "elmo_hash"), ("ner", "elmo")]:
        assert (
            overrides_of(grid.train_command(args, task, system, 1.0, 0))["--paths.elmo"] == "models/bilm-ewt"
        )
    assert grid.parse_bilm_for("joint:elmo_joint=models/bilm-registry") == (
        ("joint", "elmo_joint"),
        "models/bilm-registry",
    )
    for wrong in ["ner:elmo_hash", "ner=bundled", "pos:elmo=bundled", "ner:elmo2=bundled", "ner:elmo="]:
        with pytest.raises(argparse.ArgumentTypeError, match=f"{wrong!r} is not TASK:SYSTEM=PATH"):
            grid.parse_bilm_for(wrong)


def test_spacy_pretrain_system_loads_the_tasks_own_pretrained_weights():
    args = arguments(pretrained_tok2vec="models/cnn-pretrain-{task}/model-last.bin")
    command = grid.train_command(args, "parser", "cnn_pretrain", 1.0, 0)
    options = overrides_of(command)
    assert options["--initialize.init_tok2vec"] == "models/cnn-pretrain-parser/model-last.bin"
    assert command[4] == str(Path("models/parser_cnn_pretraining.cfg"))


def test_a_run_whose_scores_exist_is_skipped_and_the_joint_run_scores_both_tasks(
    tmp_path, monkeypatch, capsys
):
    commands = []
    scores = '{"ents_f": 0.5, "dep_las": 0.6}'

    def fake_run(command, check, **options):
        commands.append(command)
        if "evaluate" in command:
            Path(command[command.index("--output") + 1]).write_text(scores)

    monkeypatch.setattr(grid.subprocess, "run", fake_run)
    monkeypatch.setattr(grid, "write_mix_weights", lambda model, component, output: output.write_text("{}"))
    args = arguments(metrics_dir=tmp_path, test=Path("corpus/test.spacy"), force=False)
    args.jobs = 1
    grid.run_grid(args, [("joint", "elmo_joint", 1.0, 0)])
    assert [command[3] for command in commands] == ["train", "evaluate"]
    for task in ("ner", "parser"):
        assert (tmp_path / f"{task}__elmo_joint__1.0__seed0.json").read_text() == scores
        assert (tmp_path / f"{task}__elmo_joint__1.0__seed0.mix.json").exists()
    capsys.readouterr()
    for jobs in (1, 2):
        args.jobs = jobs
        grid.run_grid(args, [("joint", "elmo_joint", 1.0, 0)])
        assert len(commands) == 2
        assert (
            capsys.readouterr().out
            == "[1/1] joint: joint NER+parser, one ELMo, 100% of train, seed 0: its scores exist, skipped\n"
        )
    (tmp_path / "parser__elmo_joint__1.0__seed0.json").unlink()  # one task's scores are not enough
    args.jobs = 1
    grid.run_grid(args, [("joint", "elmo_joint", 1.0, 0)])
    assert len(commands) == 4


def test_each_run_records_the_weights_it_started_from(tmp_path, monkeypatch):
    def fake_run(command, check, **options):
        if "evaluate" in command:
            Path(command[command.index("--output") + 1]).write_text('{"dep_las": 0.6}')
        else:  # weights changed while a run trains are not what it started from
            tok2vec.write_bytes(b"overwritten")

    monkeypatch.setattr(grid.subprocess, "run", fake_run)
    monkeypatch.setattr(grid, "write_mix_weights", lambda model, component, output: output.write_text("{}"))
    tok2vec = tmp_path / "model4.bin"
    tok2vec.write_bytes(b"spacy pretrain weights")
    bilm = tmp_path / "bilm-ewt"
    bilm.mkdir()
    (bilm / "model.safetensors").write_bytes(b"biLM weights")
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    args = arguments(metrics_dir=metrics, test=Path("corpus/test.spacy"), force=False, max_steps=2000)
    args.pretrained_tok2vec, args.bilm = str(tok2vec), str(bilm)
    grid.run_one(args, "parser", "cnn_pretrain", 0.3, 1)
    grid.run_one(args, "parser", "elmo", 0.3, 1)
    pretrained = json.loads((metrics / "parser__cnn_pretrain__0.3__seed1.run.json").read_text())
    assert pretrained["pretrained_tok2vec"] == {
        "path": str(tok2vec),
        "sha256": hashlib.sha256(b"spacy pretrain weights").hexdigest(),
    }
    assert "bilm" not in pretrained and pretrained["max_steps"] == 2000
    assert isinstance(pretrained["minutes"], float)
    assert f"--initialize.init_tok2vec {tok2vec}" in pretrained["command"]
    elmo = json.loads((metrics / "parser__elmo__0.3__seed1.run.json").read_text())
    assert elmo["bilm"] == {"path": str(bilm), "sha256": hashlib.sha256(b"biLM weights").hexdigest()}
    assert "pretrained_tok2vec" not in elmo
    assert elmo["versions"]["spacy"] == spacy.__version__
    assert elmo["versions"]["torch"] == torch.__version__
    assert set(elmo["versions"]) == {"python", *grid.RECORDED_PACKAGES}
    assert (elmo["jobs"], elmo["threads_per_run"]) == (1, "inherited")
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists() and "model name" in cpuinfo.read_text():
        assert f"model name\t: {elmo['cpu'].split(' (')[0]}\n" in cpuinfo.read_text()
    else:  # no model name to read (e.g. some ARM kernels): what `platform` says
        assert elmo["cpu"] in (platform.processor(), platform.machine())


def test_the_cpu_is_named_with_its_family_and_model_numbers():
    processor = (
        "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nstepping\t: 1\n"
    )
    other = processor.replace("17", "1").replace("AMD EPYC", "Other")
    assert grid.describe_cpu(processor + "\n" + other) == "AMD EPYC (cpu family 25, model 17, stepping 1)"
    assert grid.describe_cpu("model name\t: Some CPU\n") == "Some CPU"
    assert grid.describe_cpu("processor\t: 0\nBogoMIPS\t: 50.00\n") is None


def test_the_bundled_biLM_is_recorded_by_name_and_version():
    from spacy_elmo.bundled import BUNDLED_PATH, bundled_card

    record = grid.run_record(arguments(), "ner", "elmo_hash", 1.0, 0)
    assert record["bilm"] == {
        "path": f"bundled en_elmo_cpu {bundled_card()['version']}",
        "sha256": grid.weights_sha256(BUNDLED_PATH / "model.safetensors", "--bilm"),
    }


def test_jobs_train_side_by_side_each_with_its_threads_and_its_own_log(tmp_path, monkeypatch):
    both_training = threading.Barrier(2, timeout=10)  # broken unless two runs train at once
    environments = []

    def fake_run(command, check, env, stdout, stderr):
        if "train" in command:
            environments.append(env)
            both_training.wait()
            print(f"training {command[command.index('--output') + 1]}", file=stdout, flush=True)
        else:
            Path(command[command.index("--output") + 1]).write_text('{"ents_f": 0.5}')

    monkeypatch.setattr(grid.subprocess, "run", fake_run)
    args = arguments(metrics_dir=tmp_path / "metrics", training_dir=tmp_path / "training")
    args.metrics_dir.mkdir()
    args.test, args.force, args.jobs, args.threads_per_run = Path("test.spacy"), False, 2, 1
    grid.run_grid(args, [("ner", "cnn", 1.0, 0), ("ner", "cnn", 1.0, 1)])
    assert [env["OMP_NUM_THREADS"] for env in environments] == ["1", "1"]
    for seed in (0, 1):
        log = (tmp_path / "training" / f"ner__cnn__1.0__seed{seed}.log").read_text()
        assert log == f"training {tmp_path / 'training' / f'ner__cnn__1.0__seed{seed}'}\n"
        assert (tmp_path / "metrics" / f"ner__cnn__1.0__seed{seed}.json").exists()


def test_with_jobs_a_failed_run_leaves_the_others_to_finish_and_is_named_at_the_end(tmp_path, monkeypatch):
    def fake_run(command, check, env, stdout, stderr):
        if (
            "train" in command
            and "--system.seed" in command
            and command[command.index("--system.seed") + 1] == "1"
        ):
            raise subprocess.CalledProcessError(1, command)
        if "evaluate" in command:
            Path(command[command.index("--output") + 1]).write_text('{"ents_f": 0.5}')

    monkeypatch.setattr(grid.subprocess, "run", fake_run)
    args = arguments(metrics_dir=tmp_path / "metrics", training_dir=tmp_path / "training")
    args.metrics_dir.mkdir()
    args.test, args.force, args.jobs, args.threads_per_run = Path("test.spacy"), False, 2, 1
    runs = [("ner", "cnn", 1.0, seed) for seed in range(3)]
    with pytest.raises(SystemExit) as error:
        grid.run_grid(args, runs)
    message = str(error.value)
    assert message.startswith("1 of 3 runs failed:")
    assert "seed 1: `spacy train` exited with 1: see " in message
    assert str(tmp_path / "training" / "ner__cnn__1.0__seed1.log") in message
    assert sorted(path.name for path in args.metrics_dir.glob("*__seed?.json")) == [
        "ner__cnn__1.0__seed0.json",
        "ner__cnn__1.0__seed2.json",
    ]


def test_with_jobs_an_error_that_is_not_a_failed_command_is_named_with_its_traceback(
    tmp_path, monkeypatch, capsys
):
    def fake_run(command, check, env, stdout, stderr):
        if "evaluate" in command:
            Path(command[command.index("--output") + 1]).write_text('{"ents_f": 0.5}')

    def broken_mix(model, component, output):
        raise KeyError("elmo_mix")

    monkeypatch.setattr(grid.subprocess, "run", fake_run)
    monkeypatch.setattr(grid, "write_mix_weights", broken_mix)
    args = arguments(metrics_dir=tmp_path / "metrics", training_dir=tmp_path / "training")
    args.metrics_dir.mkdir()
    args.test, args.force, args.jobs, args.threads_per_run = Path("test.spacy"), False, 2, 1
    with pytest.raises(SystemExit) as error:
        grid.run_grid(args, [("ner", "elmo", 1.0, 0), ("ner", "cnn", 1.0, 0)])
    assert str(error.value) == (
        "1 of 2 runs failed:\n[1/2] ner: (c) ELMo, frozen biLM, 100% of train, seed 0: "
        "KeyError: 'elmo_mix' (traceback above)"
    )
    assert "in broken_mix" in capsys.readouterr().out
    assert (tmp_path / "metrics" / "ner__cnn__1.0__seed0.json").exists()


def test_jobs_start_the_longest_runs_first_and_one_job_stops_at_a_failure(tmp_path, monkeypatch):
    started = []
    first_two = threading.Barrier(2, timeout=10)  # neither ends before both have started

    def fake_run(command, check, env, stdout, stderr):
        if "train" in command:
            started.append(Path(command[command.index("--output") + 1]).name)
            if len(started) <= 2:
                first_two.wait()
            if len(started) == 4:
                raise subprocess.CalledProcessError(2, command)
        else:
            Path(command[command.index("--output") + 1]).write_text('{"ents_f": 0.5}')

    monkeypatch.setattr(grid.subprocess, "run", fake_run)
    monkeypatch.setattr(grid, "write_mix_weights", lambda model, component, output: output.write_text("{}"))
    args = arguments(metrics_dir=tmp_path / "metrics", training_dir=tmp_path / "training")
    args.metrics_dir.mkdir()
    args.test, args.force, args.jobs, args.threads_per_run = Path("test.spacy"), False, 1, 0
    runs = [("ner", "cnn", 1.0, 0), ("parser", "cnn", 1.0, 0), ("joint", "elmo_joint", 1.0, 0)]
    args.jobs = 2
    grid.run_grid(args, runs)
    assert set(started[:2]) == {"joint__elmo_joint__1.0__seed0", "parser__cnn__1.0__seed0"}
    assert started[2] == "ner__cnn__1.0__seed0"  # the shortest waits for a free job
    args.jobs = 1
    with pytest.raises(
        SystemExit,
        match=r"^\[1/2\] ner: \(a\) CNN tok2vec, 30% of train, seed 0: `spacy train` exited with 2$",
    ):
        grid.run_grid(args, [("ner", "cnn", 0.3, 0), ("ner", "cnn", 0.3, 1)])
    assert started[3:] == ["ner__cnn__0.3__seed0"]  # the second run never started


def test_jobs_share_out_the_cpus_unless_told_and_must_be_positive(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(
        grid, "run_grid", lambda args, runs: seen.append((args.jobs, args.threads_per_run, len(runs)))
    )
    monkeypatch.setattr(grid, "available_cpus", lambda: 8)
    command = ["grid.py", "--tasks", "ner", "--systems", "cnn", "--seeds", "0", "1", "--max-steps", "10"]
    command += ["--eval-frequency", "5", "--metrics-dir", str(tmp_path)]
    for options in (["--jobs", "2"], ["--jobs", "3", "--threads-per-run", "1"], []):
        monkeypatch.setattr(sys, "argv", command + options)
        grid.main()
    assert seen == [(2, 4, 2), (3, 1, 2), (1, 0, 2)]  # 0: the threads the environment gives
    monkeypatch.setattr(sys, "argv", command + ["--jobs", "0"])
    with pytest.raises(SystemExit):
        grid.main()


def test_bilm_takes_the_bundled_keyword_as_bilm_for_does(tmp_path, monkeypatch):
    read = []
    monkeypatch.setattr(grid, "run_grid", lambda args, runs: read.append(args.bilm))
    command = ["grid.py", "--tasks", "ner", "--systems", "elmo", "--max-steps", "10", "--eval-frequency", "5"]
    for bilm in ["bundled", "models/bilm-ewt"]:
        monkeypatch.setattr(sys, "argv", command + ["--metrics-dir", str(tmp_path), "--bilm", bilm])
        grid.main()
    assert read == ["", "models/bilm-ewt"]  # '': the bundled biLM, as when --bilm is left out


def test_missing_weights_fail_the_run_before_it_trains_with_the_option_named(tmp_path, monkeypatch):
    monkeypatch.setattr(grid.subprocess, "run", lambda *a, **k: pytest.fail("nothing may run"))
    args = arguments(metrics_dir=tmp_path, test=Path("test.spacy"), force=False)
    args.pretrained_tok2vec = str(tmp_path / "cnn-pretrain" / "model4.bin")
    with pytest.raises(SystemExit) as error:
        grid.run_grid(args, [("ner", "cnn_pretrain", 1.0, 0)])
    assert str(error.value) == (
        f"[1/1] ner: (b) CNN + spacy pretrain, 100% of train, seed 0: --pretrained-tok2vec (`spacy "
        f"pretrain` weights) {args.pretrained_tok2vec}: there is no {args.pretrained_tok2vec}"
    )
    args.bilm = str(tmp_path)  # a folder without a biLM
    with pytest.raises(SystemExit, match=f"--bilm {tmp_path}: there is no {tmp_path / 'model.safetensors'}"):
        grid.run_grid(args, [("parser", "elmo", 1.0, 0)])
    args.bilm, args.bilm_for = "", {("ner", "elmo"): str(tmp_path)}
    with pytest.raises(SystemExit, match=f"--bilm-for ner:elmo {tmp_path}: there is no"):
        grid.run_grid(args, [("ner", "elmo", 1.0, 0)])


def test_out_of_domain_sets_are_scored_per_task_and_a_resumed_grid_scores_only_what_is_missing(
    tmp_path, monkeypatch, capsys
):
    commands = []

    def fake_run(command, check, **options):
        commands.append(command)
        if "evaluate" in command:
            test_set = command[5]
            Path(command[command.index("--output") + 1]).write_text(json.dumps({"test_set": test_set}))

    monkeypatch.setattr(grid.subprocess, "run", fake_run)
    monkeypatch.setattr(grid, "write_mix_weights", lambda model, component, output: output.write_text("{}"))
    ood = {"ner": Path("corpus/pud-ner.spacy"), "parser": Path("corpus/pud-parse.spacy")}
    args = arguments(
        metrics_dir=tmp_path / "metrics",
        training_dir=tmp_path / "training",
        test=Path("corpus/test.spacy"),
        force=False,
        ood_test=ood,
    )
    args.metrics_dir.mkdir()
    grid.run_grid(args, [("joint", "elmo_joint", 1.0, 0)])
    assert [command[3] for command in commands] == ["train", "evaluate", "evaluate", "evaluate"]
    for task, test_set in ood.items():
        scores = json.loads((args.metrics_dir / f"{task}__elmo_joint__1.0__seed0.ood.json").read_text())
        assert scores == {"test_set": str(test_set)}
    # The out-of-domain scores of one task go missing: only they are made again, without training.
    (args.metrics_dir / "parser__elmo_joint__1.0__seed0.ood.json").unlink()
    (args.training_dir / "joint__elmo_joint__1.0__seed0" / "model-best").mkdir(parents=True)
    capsys.readouterr()
    grid.run_grid(args, [("joint", "elmo_joint", 1.0, 0)])
    assert [command[3] for command in commands[4:]] == ["evaluate"] and commands[4][5] == str(ood["parser"])
    assert "out-of-domain scores only" in capsys.readouterr().out
    # Without its trained model there is nothing to score: the run is named with the fix.
    (args.metrics_dir / "ner__elmo_joint__1.0__seed0.ood.json").unlink()
    (args.training_dir / "joint__elmo_joint__1.0__seed0" / "model-best").rmdir()
    with pytest.raises(SystemExit, match="model-best is gone: rerun it with --force"):
        grid.run_grid(args, [("joint", "elmo_joint", 1.0, 0)])


def test_mix_summary_reads_a_trained_mix_without_a_warning() -> None:
    """The report's mix weights: softmax of the learned weights and gamma, as plain floats, with no
    `requires_grad` scalar-conversion warning (it used to print in every grid run)."""
    import warnings

    import numpy as np

    from spacy_elmo.pipeline.mix import elmo_mix, scalar_mix

    mix = elmo_mix(width=None, dropout=0.0, l2_lambda=0.0)
    mix.initialize(X=[np.zeros((3, 2, 4), dtype="float32")])
    with torch.no_grad():
        scalar_mix(mix).weights.copy_(torch.tensor([0.0, 1.0, 2.0]))
        scalar_mix(mix).gamma.fill_(1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = grid.mix_summary(mix)
    expected = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    np.testing.assert_allclose(summary["weights"], expected, rtol=1e-6)
    assert summary["gamma"] == 1.5 and all(type(weight) is float for weight in summary["weights"])
