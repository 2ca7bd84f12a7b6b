"""Every bad input gives one clear message: what, where, how to fix it (exit status 1, no traceback)."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm.errors import ElmoError
from spacy_elmo.cli import app
from spacy_elmo.training import (
    CorpusError,
    DeviceError,
    OutputDirError,
    TrainingConfigError,
    load_pretrain_config,
    pretrain,
)
from spacy_elmo.training.corpus import DocumentReader

from .conftest import TINY_CONFIG, tiny_overrides

runner = CliRunner()


def run_cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    return result.output


def test_empty_corpus(tmp_path, tiny_corpus):
    (tmp_path / "empty.txt").write_text("")
    output = run_cli(
        "pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--paths.train", str(tmp_path / "empty.txt")
    )
    assert "empty.txt is empty" in output and "[paths] train" in output


def test_corpus_of_only_whitespace(tmp_path):
    (tmp_path / "blank.txt").write_text("   \n\t\n \u3000 \n\n")
    output = run_cli(
        "pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--paths.train", str(tmp_path / "blank.txt")
    )
    assert "blank.txt is only whitespace" in output


def test_undecodable_bytes_name_the_file_and_offset_or_are_skipped_and_counted(tmp_path):
    path = tmp_path / "latin1.txt.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b"A fine line.\n" + "Caf\u00e9 au lait.\n".encode("latin-1") + b"Another line.\n")
    with pytest.raises(
        CorpusError, match=r"latin1\.txt\.gz: bytes at offset 16 are not valid UTF-8.*skip_undecodable"
    ):
        list(DocumentReader([path]))
    reader = DocumentReader([path], skip_undecodable=True)
    assert list(reader) == ["A fine line.\n", "Another line.\n"] and reader.n_skipped == 1
    output = run_cli("pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--paths.train", str(path))
    assert "offset 16" in output
    result = runner.invoke(
        app,
        ["pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--paths.train", str(path),
         "--corpus.skip_undecodable", "true", "--training.max_steps", "2", "--training.eval_every", "0"],
    )  # fmt: skip
    assert result.exit_code == 0 and "Skipped 1 document(s)" in result.output


def test_unknown_config_key_in_the_file_or_an_override(tmp_path, tiny_corpus):
    config = tmp_path / "typo.cfg"
    config.write_text(TINY_CONFIG.read_text().replace("max_steps = 60", "max_step = 60"))
    with pytest.raises(
        TrainingConfigError, match=r"typo\.cfg: unknown key 'max_step' in \[training\]. Known keys"
    ):
        load_pretrain_config(config)
    output = run_cli("pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--training.max_stepz", "3")
    assert "unknown key 'max_stepz' in [training]" in output
    output = run_cli("pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--trainin.max_steps", "3")
    assert "unknown section [trainin]" in output


def test_bad_config_values_are_named(tmp_path):
    with pytest.raises(
        TrainingConfigError, match=r"\[training\] softmax is 'fast'; use one of sampled, full"
    ):
        load_pretrain_config(TINY_CONFIG, {"training.softmax": "fast"})
    with pytest.raises(TrainingConfigError, match=r"\[model\] is invalid: .*activation"):
        load_pretrain_config(TINY_CONFIG, {"model.activation": "gelu"})
    with pytest.raises(
        TrainingConfigError,
        match=r"\[training\] state_reset_probability is 1.5; input should be less than or equal to 1\.",
    ):
        load_pretrain_config(TINY_CONFIG, {"training.state_reset_probability": 1.5})
    wrong_types = {
        "training.batch_size": (True, "input should be a valid integer"),  # not read as 1
        "training.learning_rate": ("fast", "input should be a valid number"),
        "training.log_every": (0, "input should be greater than 0"),
        "corpus.skip_undecodable": ("yes", "input should be a valid boolean"),
    }
    for key, (value, message) in wrong_types.items():
        section, name = key.split(".")
        with pytest.raises(TrainingConfigError, match=rf"\[{section}\] {name} is {value!r}; {message}"):
            load_pretrain_config(TINY_CONFIG, {key: value})
    config = load_pretrain_config(TINY_CONFIG, {"model.preset": "small", "training.max_steps": 7})
    assert config.model.lstm_dim == 32 and config.model.filters == (
        (1, 8),
        (2, 8),
        (3, 16),
    )  # fields beat preset
    assert config.training.max_steps == 7


def test_missing_training_path_says_how_to_set_it(tmp_path):
    output = run_cli("pretrain", str(TINY_CONFIG), str(tmp_path / "out"))
    assert "--paths.train" in output
    output = run_cli(
        "pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--paths.train", str(tmp_path / "nope")
    )
    assert "nope does not exist" in output


def test_output_dir_holding_another_model_is_refused_unless_forced(tiny_run, tiny_corpus, tmp_path):
    output_dir, _ = tiny_run
    args = ["pretrain", str(TINY_CONFIG), str(output_dir), "--paths.train", str(tiny_corpus[0])]
    output = run_cli(*args)
    assert "already holds a model" in output and "--resume" in output and "--force" in output
    output = run_cli(*args, "--resume", "--model.lstm_dim", "24")
    assert "different model" in output
    assert "holds no checkpoint" in run_cli("pretrain", str(TINY_CONFIG), str(tmp_path), "--resume")
    (tmp_path / "notes.txt").write_text("mine")
    config = load_pretrain_config(TINY_CONFIG, tiny_overrides(tiny_corpus, max_steps=2, eval_every=0))
    with pytest.raises(OutputDirError, match="already holds files"):
        pretrain(config, tmp_path)
    pretrain(config, tmp_path, force=True)
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "notes.txt").read_text() == "mine"


def test_every_training_error_is_an_elmo_error():
    for error in (CorpusError, DeviceError, OutputDirError, TrainingConfigError):
        assert issubclass(error, ElmoError)


def test_evaluate_refuses_a_model_without_a_softmax_head(tiny_run, tiny_corpus, tmp_path: Path):
    output_dir, result = tiny_run
    result.objective.bilm.save(tmp_path)
    assert "no lm_head.safetensors" in run_cli("evaluate", str(tmp_path), str(tiny_corpus[1]))


def test_a_gpu_that_is_not_there_is_named(tmp_path, tiny_corpus):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    output = run_cli(
        "pretrain", str(TINY_CONFIG), str(tmp_path), "--paths.train", str(tiny_corpus[0]), "--gpu-id", "0"
    )
    assert "--gpu-id 0: CUDA is not available" in output


def test_optimizer_state_of_another_weight_layout_is_refused_on_resume(tmp_path: Path) -> None:
    from spacy_elmo.training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

    def adagrad_after_one_step(shape: tuple[int, ...]) -> torch.optim.Optimizer:
        parameter = torch.nn.Parameter(torch.ones(shape))
        optimizer = torch.optim.Adagrad([parameter])
        parameter.sum().backward()
        optimizer.step()
        return optimizer

    save_checkpoint(tmp_path, 1, {}, adagrad_after_one_step((2, 3, 4)), [], {})
    folder = latest_checkpoint(tmp_path)
    assert folder is not None
    load_checkpoint(folder, adagrad_after_one_step((2, 3, 4)))  # the same layout loads
    with pytest.raises(OutputDirError, match=r"'sum' of parameter 0 .* shape \(2, 3, 4\), but .* \(3, 8\)"):
        load_checkpoint(folder, adagrad_after_one_step((3, 8)))


def test_fine_tuning_refuses_a_lexicon_model(tmp_path: Path):
    from spacy_elmo.bilm import BiLM
    from spacy_elmo.bilm.errors import WeightFileError
    from spacy_elmo.training.pretrain import load_initial_model

    from ..bilm.efml_models import write_random_efml

    BiLM.from_elmoformanylangs(write_random_efml(tmp_path / "efml")).save(tmp_path / "ours")
    with pytest.raises(WeightFileError, match="ELMoForManyLangs model.*cannot be fine-tuned"):
        load_initial_model(BiLM.load(tmp_path / "ours"), tmp_path / "ours")


def test_a_config_without_any_limit_is_refused(tmp_path: Path):
    with pytest.raises(TrainingConfigError, match=r"max_steps, max_epochs and max_minutes are all 0"):
        load_pretrain_config(TINY_CONFIG, {"training.max_steps": 0})
    output = run_cli("pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--training.max_steps", "0")
    assert "so the run would never end: set at least one, e.g. --training.max_steps 1000." in output
    assert not (tmp_path / "out").exists()


def test_a_run_stopped_before_its_first_checkpoint_does_not_block_the_next(tiny_corpus, tmp_path: Path):
    wrong_dev = {
        **tiny_overrides(tiny_corpus, max_steps=2, eval_every=0),
        "paths.dev": str(tmp_path / "nope"),
    }
    with pytest.raises(CorpusError, match="nope does not exist"):
        pretrain(load_pretrain_config(TINY_CONFIG, wrong_dev), tmp_path / "out")
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["training.cfg", "vocab.txt"]
    with pytest.raises(OutputDirError, match="holds no checkpoint"):
        pretrain(load_pretrain_config(TINY_CONFIG, wrong_dev), tmp_path / "out", resume=True)
    pretrain(load_pretrain_config(TINY_CONFIG, tiny_overrides(tiny_corpus, max_steps=2)), tmp_path / "out")
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert str(tmp_path / "nope") not in (tmp_path / "out" / "training.cfg").read_text()


def test_unknown_languages_and_document_units_are_named(tmp_path: Path, tiny_corpus):
    output = run_cli(
        "pretrain", str(TINY_CONFIG), str(tmp_path / "out"), "--paths.train", str(tiny_corpus[0]),
        "--corpus.lang", "xx-nope",
    )  # fmt: skip
    assert "spaCy has no language 'xx-nope' (the text's language: [corpus] lang" in output
    with pytest.raises(CorpusError, match="document_per is 'paragraph': use one of line, file"):
        DocumentReader([tiny_corpus[0]], "paragraph")


@pytest.mark.parametrize("document_per", ["line", "file"])
def test_a_byte_order_mark_starts_no_document(tmp_path: Path, document_per: str):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffThe cat sat.\n\ufeffA dog.\n".encode())
    documents = list(DocumentReader([path], document_per))
    assert documents[0].startswith("The cat sat.")  # only the file's first mark is dropped
    assert "\ufeffA dog." in "".join(documents)


@pytest.mark.slow  # one command in a subprocess per spelling: about 4 s each
@pytest.mark.parametrize(
    ("source", "output"),
    [("m2", "m2"), ("m2", "./m2"), ("./m2", "m2/"), ("m2", "ABSOLUTE"), ("m2", "link-to-m2")],
)
def test_fine_tune_refuses_to_write_over_its_own_source_model(
    tiny_run, tiny_corpus, tmp_path, source, output
):
    shutil.copytree(tiny_run[0], tmp_path / "m2")
    (tmp_path / "link-to-m2").symlink_to(tmp_path / "m2")
    output = str(tmp_path / "m2") if output == "ABSOLUTE" else output
    weights = (tmp_path / "m2" / "model.safetensors").read_bytes()
    overrides = [f"--{key}={value}" for key, value in tiny_overrides(tiny_corpus, max_steps=2).items()]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "spacy_elmo",
            "fine-tune",
            source,
            str(TINY_CONFIG),
            output,
            "--force",
            *overrides,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "is the input" in result.stderr, result.stderr
    assert (tmp_path / "m2" / "model.safetensors").read_bytes() == weights
