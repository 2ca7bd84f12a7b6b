"""End to end on the tiny corpus: learning, outputs, exact resume after kill -9, CLI commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from spacy_elmo.bilm import BiLM, torch_probes
from spacy_elmo.bilm.precision import native_bf16
from spacy_elmo.cli import app
from spacy_elmo.training import load_pretrain_config, pretrain
from spacy_elmo.training.errors import DeviceError

from .conftest import REPO_ROOT, TINY_CONFIG, read_metrics, tiny_overrides

runner = CliRunner()


def test_training_loss_falls_and_dev_perplexity_drops_below_the_untrained_model(tiny_run):
    output_dir, _ = tiny_run
    records = read_metrics(output_dir)
    assert [record["step"] for record in records] == [0, 20, 40, 60]
    untrained, *trained = [record["dev_perplexity"] for record in records]
    assert trained[-1] < 0.85 * untrained, (untrained, trained)
    train_losses = [record["train_loss"] for record in records[1:]]
    assert train_losses[-1] < train_losses[0]
    # Training perplexity: the full softmax on the start of the training text, as for dev.
    train_perplexities = [record["train_perplexity"] for record in records]
    assert train_perplexities[-1] < 0.85 * train_perplexities[0], train_perplexities
    assert all(
        record["dev_forward_perplexity"] < records[0]["dev_forward_perplexity"] for record in records[1:]
    )
    assert all(
        record["dev_backward_perplexity"] < records[0]["dev_backward_perplexity"] for record in records[1:]
    )


def test_output_dir_is_a_model_dir_with_its_head_allennlp_export_and_plot(tiny_run):
    output_dir, result = tiny_run
    bilm = BiLM.load(output_dir)
    for name, tensor in result.objective.bilm.state_dict().items():
        assert torch.equal(bilm.state_dict()[name], tensor), name
    exported = BiLM.from_allennlp(
        output_dir / "allennlp" / "options.json", output_dir / "allennlp" / "weights.hdf5"
    )
    sentence = [["The", "cat", "sees", "the", "ball", "."]]
    assert torch.allclose(
        torch.from_numpy(exported.embed_sentences(sentence)[0]),
        torch.from_numpy(bilm.embed_sentences(sentence)[0]),
    )
    head = load_file(str(output_dir / "lm_head.safetensors"))
    vocabulary = (output_dir / "vocab.txt").read_text().splitlines()
    assert vocabulary[:3] == ["<S>", "</S>", "<UNK>"] and head["weight"].shape == (len(vocabulary), 16)
    assert (output_dir / "perplexity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_run_killed_with_sigkill_resumes_to_the_same_weights(tiny_run, tiny_corpus, tmp_path):
    reference_dir, _ = tiny_run
    train, dev = tiny_corpus
    command = [
        sys.executable, "-m", "spacy_elmo", "pretrain", str(TINY_CONFIG), str(tmp_path),
        "--paths.train", str(train), "--paths.dev", str(dev), "--training.checkpoint_every", "10",
        "--training.threads", "1",  # as the reference run in this process; 2 would spin on a busy machine
    ]  # fmt: skip
    process = subprocess.Popen(
        [*command, "--training.max_steps", "100000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    latest = tmp_path / "checkpoints" / "latest.json"
    deadline = time.monotonic() + 120
    while (
        not (latest.exists() and json.loads(latest.read_text())["step"] >= 20) and time.monotonic() < deadline
    ):
        assert process.poll() is None, "the run ended before it could be killed"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert 20 <= json.loads(latest.read_text())["step"] < 60
    resumed = subprocess.run(
        [*command, "--training.max_steps", "60", "--resume"], capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    reference, result = (
        load_file(str(reference_dir / "model.safetensors")),
        load_file(str(tmp_path / "model.safetensors")),
    )
    for name in reference:
        torch.testing.assert_close(result[name], reference[name], rtol=1e-6, atol=1e-7, msg=name)
    assert [record["step"] for record in read_metrics(tmp_path)] == [0, 20, 40, 60]
    # Same thread count, so the runs agree bit for bit here; the promise is float tolerance.
    resumed_ppl, reference_ppl = (
        read_metrics(path)[-1]["dev_perplexity"] for path in (tmp_path, reference_dir)
    )
    assert abs(resumed_ppl - reference_ppl) < 1e-6 * reference_ppl


def test_evaluate_prints_and_writes_forward_backward_and_mean_perplexity(tiny_run, tiny_corpus, tmp_path):
    output_dir, _ = tiny_run
    scores_file = tmp_path / "scores.json"
    result = runner.invoke(
        app,
        ["evaluate", str(output_dir), str(tiny_corpus[1]), "--output", str(scores_file),
         "--batch-size", "8", "--unroll-steps", "10"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    scores = json.loads(scores_file.read_text())
    for prefix in ("", "sentence_"):
        assert f"perplexity {scores[prefix + 'perplexity']:.2f}" in result.output
        assert (
            abs(
                scores[prefix + "perplexity"]
                - (scores[prefix + "forward"] * scores[prefix + "backward"]) ** 0.5
            )
            < 1e-6 * scores[prefix + "perplexity"]
        )
    assert "as the elmo component runs" in result.output
    assert scores["sentence_tokens"] < scores["tokens"]  # no </S> -> <S> step between sentences
    # The training run evaluated the same text with the same batching: the numbers agree.
    assert abs(scores["perplexity"] - read_metrics(output_dir)[-1]["dev_perplexity"]) < 1e-4


def test_fine_tune_continues_our_model_and_starts_a_new_head_for_allennlp_weights(
    tiny_run, tiny_corpus, tmp_path
):
    output_dir, _ = tiny_run
    train, dev = (str(path) for path in tiny_corpus)
    overrides = [
        "--paths.train",
        train,
        "--paths.dev",
        dev,
        "--training.max_steps",
        "10",
        "--training.eval_every",
        "10",
    ]
    result = runner.invoke(
        app, ["fine-tune", str(output_dir), str(TINY_CONFIG), str(tmp_path / "ours"), *overrides]
    )
    assert result.exit_code == 0, result.output
    start = read_metrics(tmp_path / "ours")[0]["dev_perplexity"]
    assert (
        abs(start - read_metrics(output_dir)[-1]["dev_perplexity"]) < 1e-4
    )  # it starts where training ended
    # the same command again gives the same weights bit for bit (on one machine, one thread count)
    again = ["fine-tune", str(output_dir), str(TINY_CONFIG), str(tmp_path / "again"), *overrides]
    assert runner.invoke(app, again).exit_code == 0
    first, second = (load_file(str(tmp_path / name / "model.safetensors")) for name in ("ours", "again"))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)
    allennlp = output_dir / "allennlp"
    imported = ["fine-tune", str(allennlp / "options.json"), str(TINY_CONFIG), str(tmp_path / "imported")]
    result = runner.invoke(app, [*imported, *overrides, "--weights", str(allennlp / "weights.hdf5")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "imported" / "lm_head.safetensors").exists()
    assert BiLM.load(tmp_path / "imported").config == BiLM.load(output_dir).config


def test_export_checkpoint_writes_the_model_the_finished_run_wrote(tiny_run, tmp_path):
    # tiny_run's last checkpoint is its final step: exporting it must give the run's own model files.
    run_dir, _ = tiny_run
    result = runner.invoke(app, ["export-checkpoint", str(run_dir), str(tmp_path / "model")])
    assert result.exit_code == 0, result.output
    assert "step 60" in result.output
    for name in ("model.safetensors", "lm_head.safetensors"):
        exported, written = (load_file(str(folder / name)) for folder in (tmp_path / "model", run_dir))
        assert exported.keys() == written.keys(), name
        assert all(torch.equal(exported[key], written[key]) for key in written), name
    for name in ("config.json", "vocab.txt", "training.cfg", "allennlp/options.json"):
        assert (tmp_path / "model" / name).read_text() == (run_dir / name).read_text(), name
    assert (tmp_path / "model" / "perplexity.png").is_file()
    # The run is left as it was: its checkpoint is still there to resume from.
    assert (run_dir / "checkpoints" / "latest.json").is_file()


def test_export_checkpoint_errors_name_the_problem(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    checkpoint = next((run_dir / "checkpoints").glob("step-*"))
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    (incomplete / "state.json").write_text((checkpoint / "state.json").read_text())
    other_vocabulary = tmp_path / "other_run"
    other_vocabulary.mkdir()
    (other_vocabulary / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nword\n")
    cases = [
        ([str(tmp_path), str(tmp_path / "out")], "holds no checkpoint"),
        ([str(run_dir), str(run_dir)], "a directory other than the run's own"),
        ([str(run_dir), str(tmp_path / "out"), "--checkpoint", str(incomplete)], "no model.safetensors"),
        ([str(other_vocabulary), str(tmp_path / "out"), "--checkpoint", str(checkpoint)], "head.weight"),
        ([str(run_dir), str(tmp_path)], "--force"),  # not empty
    ]
    for arguments, message in cases:
        result = runner.invoke(app, ["export-checkpoint", *arguments])
        assert result.exit_code == 1 and message in result.output, (arguments, result.output)
        assert "Traceback" not in result.output


def test_python_dash_m_lists_the_training_commands():
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "--help"], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert result.returncode == 0
    commands = ("pretrain", "fine-tune", "export-checkpoint", "evaluate")
    assert all(command in result.stdout for command in commands)


def test_max_epochs_stops_after_one_pass_and_dev_documents_are_held_out(tiny_corpus, tmp_path):
    overrides = {**tiny_overrides(tiny_corpus, max_steps=0, max_epochs=1, eval_every=0), "paths.dev": None}
    config = load_pretrain_config(TINY_CONFIG, {**overrides, "corpus.dev_documents": 40})
    result = pretrain(config, tmp_path)
    record = result.metrics
    assert record["epoch"] == 1 and record["dev_perplexity"] is not None
    # 360 training documents of about 2.5 sentences of ~8 tokens: one pass is ~7,500 tokens.
    assert 5_000 < record["tokens"] < 10_000, record
    assert 0 < record["dev_tokens"] <= 5_000
    for name in ("train", "dev"):  # the geometric mean of the two directions' perplexities
        both = (record[f"{name}_forward_perplexity"] * record[f"{name}_backward_perplexity"]) ** 0.5
        assert record[f"{name}_perplexity"] == pytest.approx(both, rel=1e-9)


def test_a_log_file_gets_the_bar_at_its_interval_not_at_every_logged_step(tiny_corpus, tmp_path, capfd):
    """Not a terminal: the bar is redrawn once a minute, with each evaluation's line and at the end."""
    overrides = tiny_overrides(tiny_corpus, max_steps=40, log_every=2, eval_every=20)
    pretrain(load_pretrain_config(TINY_CONFIG, overrides), tmp_path)
    draws = capfd.readouterr().err.count("/40 [")
    assert draws <= len(read_metrics(tmp_path)) + 2  # 3 evaluation lines, the first and last draws


@pytest.mark.skipif(not native_bf16(torch.device("cpu")), reason="this CPU has no bf16 instructions")
def test_bf16_training_learns_like_float32_and_keeps_float32_weights(tiny_run, tiny_corpus, tmp_path):
    """The same 60 steps as the float32 reference run, with the products under bf16 autocast."""
    reference_dir, _ = tiny_run
    config = load_pretrain_config(TINY_CONFIG, {**tiny_overrides(tiny_corpus), "training.precision": "bf16"})
    result = pretrain(config, tmp_path)
    want = read_metrics(reference_dir)[-1]["dev_perplexity"]
    got = result.metrics["dev_perplexity"]
    assert got != want and abs(got - want) < 0.05 * want, (got, want)
    weights = load_file(tmp_path / "model.safetensors")
    assert all(tensor.dtype == torch.float32 for tensor in weights.values())


def test_bf16_training_without_bf16_instructions_is_refused(tiny_corpus, tmp_path, monkeypatch):
    """Also on an AVX-512 CPU whose oneDNN accepts bf16 but has no bf16 instructions: it ran
    there, 5x slower than float32, while the docs promised this error."""
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    monkeypatch.setattr(torch_probes, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "avx512_vnni"}))
    config = load_pretrain_config(TINY_CONFIG, {**tiny_overrides(tiny_corpus), "training.precision": "bf16"})
    with pytest.raises(DeviceError, match='precision = "bf16" needs .* use precision = "fp32"'):
        pretrain(config, tmp_path)
    assert not (tmp_path / "model.safetensors").exists()
