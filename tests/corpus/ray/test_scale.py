"""Corpus runs of any size (`spacy_elmo.corpus`) on real local Ray clusters: a command killed with
SIGKILL resumes without redoing its written blocks and gives an uninterrupted run's output; the
model reaches workers that cannot read its path; every input form; the completeness check; the
provenance of every file; and the output is claimed, never lost."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app

from ...waiting import wait_for

ray = pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')
import pyarrow  # noqa: E402
import pyarrow.parquet  # noqa: E402

from spacy_elmo.corpus.provenance import read_provenance  # noqa: E402

pytestmark = pytest.mark.slow  # every test starts Ray actors or a cluster: 10 to 90 s each
runner = CliRunner()
ROWS = 120
TIMEOUT_S = 300
WIDTH = 16  # the tiny biLM's vectors


def corpus_file(folder: Path, rows: int = ROWS) -> Path:
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(f"row {number} of a corpus\n" for number in range(rows)), encoding="utf8")
    return corpus


def rows_by_id(folder: Path) -> dict:
    table = pyarrow.parquet.read_table(folder)
    return {row["id"]: row for row in table.to_pylist()}


def command(*arguments: object) -> list[str]:
    return [sys.executable, "-m", "spacy_elmo", *map(str, arguments)]


def parts_of(run_folder: Path) -> dict[str, tuple[int, int]]:
    """Written parts by name: (inode, mtime in ns), to tell a kept part from a rewritten one."""
    found = {}
    for part in (run_folder / "parts").glob("part-*.parquet"):
        info = part.stat()
        found[part.name] = (info.st_ino, info.st_mtime_ns)
    return found


def test_a_killed_command_resumes_without_redoing_its_blocks(ray_cluster, bilm_path, tmp_path):
    """The command (a subprocess joined to the test's cluster) gets SIGKILL once blocks are
    written; without --resume the leftovers are refused; with --resume the written blocks are
    kept as they are (the same files) and the output equals an uninterrupted run's."""
    corpus, output = corpus_file(tmp_path), tmp_path / "out"
    run_folder = tmp_path / ".out.spacy-elmo-run"
    arguments = two_workers_two_rows_a_file(bilm_path, corpus, output)
    kept = killed_run(arguments, ray_cluster, run_folder, parts=6)
    assert 6 <= len(kept) < ROWS // 2, "the run ended before it was killed"
    assert not output.exists()  # nothing is moved into place before the run is complete

    refused = runner.invoke(app, list(map(str, arguments)))
    assert refused.exit_code == 1
    assert "has an unfinished run" in refused.output and "--resume" in refused.output
    assert "--force" in refused.output and not output.exists()

    resumed = runner.invoke(app, [*map(str, arguments), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert f"Wrote {ROWS} rows" in resumed.output and not run_folder.exists()
    for name, identity in kept.items():  # moved into the output, not written again
        info = (output / name).stat()
        assert (info.st_ino, info.st_mtime_ns) == identity, name

    whole = tmp_path / "uninterrupted"
    invoke([*arguments[:3], whole, *arguments[4:]])
    assert_same_rows(rows_by_id(output), rows_by_id(whole))
    assert sorted(rows_by_id(whole)) == list(range(1, ROWS + 1))


def assert_same_rows(got: dict, want: dict) -> None:
    """Same ids, tokens and vectors. Vectors to 1e-6: a worker's cache of token-encoder outputs
    depends on what it embedded before, and MKL rounds products of other shapes differently in
    the last bit (seen: 1.3e-9)."""
    assert sorted(got) == sorted(want)
    for row_id, row in want.items():
        assert got[row_id]["tokens"] == row["tokens"]
        np.testing.assert_allclose(
            np.asarray(got[row_id]["vectors"], dtype=np.float32).reshape(-1, WIDTH),
            np.asarray(row["vectors"], dtype=np.float32).reshape(-1, WIDTH),
            atol=1e-6,
            rtol=0,
        )


def test_a_second_command_for_the_same_output_is_refused_while_the_first_runs(
    ray_cluster, bilm_path, tmp_path
):
    """The first is killed once the second was refused: long enough to overlap anywhere."""
    corpus, output = corpus_file(tmp_path, rows=40 * ROWS), tmp_path / "out"
    run_folder = tmp_path / ".out.spacy-elmo-run"
    arguments = ["embed", bilm_path, corpus, output, "--engine", "ray", "--rows-per-file", "2"]
    arguments += ["--address", ray_cluster]
    first = subprocess.Popen(command(*arguments), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (run_folder / "run.json").exists(), "the first run to start")
        second = subprocess.run(command(*arguments), capture_output=True, text=True, timeout=TIMEOUT_S)
        assert first.poll() is None, "the first run ended before the second was refused"
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [
            f"Error: Another spacy-elmo run is writing {output} now (it holds {run_folder}): wait for it "
            "to end, or write to another path."
        ]
    finally:
        first.kill()
        first.wait(timeout=30)
    assert run_folder.is_dir() and not output.exists()  # the first run's blocks wait for --resume


def two_workers_two_rows_a_file(model: Path, corpus: Path, output: Path) -> list:
    """`embed` on Ray with many small files, to kill a run while it writes them."""
    return ["embed", model, corpus, output, "--engine", "ray", "--workers", "2", "--rows-per-file", "2"]


def invoke(arguments: list) -> str:
    result = runner.invoke(app, [str(argument) for argument in arguments])
    assert result.exit_code == 0, result.output
    return result.output


def killed_run(arguments: list, address: str, run_folder: Path, parts: int) -> dict[str, tuple[int, int]]:
    """Start the command in a subprocess joined to the test's cluster and SIGKILL it once `parts`
    blocks are written; returns the parts it left."""
    process = subprocess.Popen(
        command(*arguments, "--address", address), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: len(parts_of(run_folder)) >= parts, f"{parts} written blocks")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
    return parts_of(run_folder)


def test_a_part_with_other_rows_stops_the_run_before_its_output(ray_cluster, bilm_path, tmp_path):
    """The completeness check reads each input file's manifest and its parts' footers: a part that
    holds another block's rows is found and deleted, nothing is published and the run folder
    stays; --resume, as the error says, computes that block again and publishes."""
    corpus, output = corpus_file(tmp_path), tmp_path / "out"
    run_folder = tmp_path / ".out.spacy-elmo-run"
    arguments = two_workers_two_rows_a_file(bilm_path, corpus, output)
    kept = killed_run(arguments, ray_cluster, run_folder, parts=3)
    assert len(kept) < ROWS // 2, "the run ended before it was killed"
    first, second = (run_folder / "parts" / name for name in sorted(kept)[:2])
    second.write_bytes(first.read_bytes())  # the first block's rows under the second block's name
    result = runner.invoke(app, [*map(str, arguments), "--resume"])
    assert result.exit_code == 1
    assert f"corpus.txt, part {int(second.name.split('-')[2][:9])}: the part holds" in result.output
    assert "or other ids; deleted" in result.output and "nothing was moved to the output" in result.output
    assert "--resume" in result.output and not output.exists() and run_folder.exists()
    assert not second.exists() and first.exists()
    invoke([*arguments, "--resume"])
    assert sorted(rows_by_id(output)) == list(range(1, ROWS + 1))


def test_workers_get_the_model_from_the_object_store_on_a_two_node_cluster(bilm_path, tmp_path):
    """A two-node cluster whose nodes have their own empty model caches; the model's folder is
    deleted as soon as the run has recorded its settings, before any worker starts."""
    script = tmp_path / "two_nodes.py"
    script.write_text(TWO_NODE_SCRIPT, encoding="utf8")
    model = tmp_path / "model"
    model.mkdir()
    for file in bilm_path.iterdir():
        (model / file.name).write_bytes(file.read_bytes())
    result = subprocess.run(
        [sys.executable, str(script), str(model), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "deleted before the first part: True" in result.stdout
    assert "nodes: 2" in result.stdout
    assert not model.exists()
    for node in ("cache-head", "cache-worker"):
        assert not any((tmp_path / node).iterdir()), f"{node} was written to"
    got = rows_by_id(tmp_path / "out")
    assert sorted(got) == list(range(1, 41))
    from spacy_elmo.corpus import Annotator

    want = Annotator.from_model(bilm_path).annotate("text", [f"row {n} of a corpus" for n in range(40)], None)
    for number, vectors in enumerate(want["vectors"], start=1):
        np.testing.assert_allclose(
            np.asarray(got[number]["vectors"], dtype=np.float32).reshape(-1, WIDTH),
            vectors,
            atol=1e-6,
            rtol=0,
        )


TWO_NODE_SCRIPT = """
import os, sys, threading, time
from pathlib import Path
import ray
from ray.cluster_utils import Cluster

model, root = Path(sys.argv[1]), Path(sys.argv[2])
for name in ("cache-head", "cache-worker"):
    (root / name).mkdir()
os.environ["SPACY_ELMO_CACHE"] = str(root / "cache-head")
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
os.environ["SPACY_ELMO_CACHE"] = str(root / "cache-worker")
cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
ray.init(address=cluster.address, log_to_driver=False)
print("nodes:", len([node for node in ray.nodes() if node["Alive"]]))
(root / "corpus.txt").write_text("".join(f"row {n} of a corpus\\n" for n in range(40)))
run_folder = root / ".out.spacy-elmo-run"
deleted = []

def delete_the_model_once_the_run_has_started():
    while not (run_folder / "run.json").exists():
        time.sleep(0.01)
    deleted.append(not any((run_folder / "parts").glob("*.parquet")))
    for file in model.iterdir():
        file.unlink()
    model.rmdir()

threading.Thread(target=delete_the_model_once_the_run_has_started, daemon=True).start()
from spacy_elmo.corpus import run_corpus

summary = run_corpus(root / "corpus.txt", root / "out", model=model, workers=2, batch_size=4, engine="ray")
print(summary.line())
print("deleted before the first part:", deleted == [True])
ray.shutdown()
cluster.shutdown()
"""


def test_a_run_cuts_its_files_by_the_size_target(ray_cluster, bilm_path, tmp_path):
    """120 rows of 5 tokens; the tiny biLM's average vectors take 4 x 16 + 16 bytes a token:
    400 bytes a row, so a target of 64 rows' bytes gives files of 64 rows (and the rest)."""
    from spacy_elmo.corpus import run_corpus

    corpus = corpus_file(tmp_path)
    summary = run_corpus(
        corpus, tmp_path / "out", model=bilm_path, target_file_bytes=64 * 400, workers=2, engine="ray"
    )
    assert summary.rows == ROWS
    files = sorted((tmp_path / "out").glob("*.parquet"))
    assert [file.name for file in files] == ["part-000000-000000000.parquet", "part-000000-000000001.parquet"]
    assert [pyarrow.parquet.read_metadata(file).num_rows for file in files] == [64, ROWS - 64]


def test_auto_is_timed_on_a_worker_at_a_workers_thread_count(ray_cluster, tmp_path):
    """`--precision auto` is measured once per run in a Ray task with a worker's one CPU, not in
    the command's process: the timings it leaves in the workers' cache were taken at 1 thread.
    A biLM of an LSTM width no other test (nor an earlier run) uses, so that the timings of that
    shape in the cache are this run's."""
    import time

    import torch

    from spacy_elmo.bilm import BiLM
    from spacy_elmo.bilm.auto_precision import default_cache_dir
    from spacy_elmo.bilm.config import BiLMConfig

    if torch.get_num_threads() < 2:
        pytest.skip("the command's process runs 1 thread here too: nothing tells the two apart")
    model, width = tmp_path / "model", 1001 + 2 * (time.time_ns() // 1000 % 4000)
    torch.manual_seed(0)
    BiLM(BiLMConfig(lstm_dim=width, projection_dim=8, filters=((1, 8), (2, 8)), n_highway=1)).save(model)
    invoke(
        [
            "embed",
            model,
            corpus_file(tmp_path, rows=8),
            tmp_path / "out",
            "--engine",
            "ray",
            "--precision",
            "auto",
        ]
    )
    cache = Path(ray.get(ray.remote(lambda: str(default_cache_dir())).remote()))
    keys = [json.loads(json.loads(record.read_text())["key"]) for record in cache.glob("*.json")]
    ours = [key for key in keys if width in key["shape"] or 4 * width in key["shape"]]
    assert ours and {key["threads"] for key in ours} == {1}


def test_every_input_form_gives_the_same_rows(ray_cluster, bilm_path, tmp_path):
    """A folder of JSON-lines shards (upper-case suffixes too), a glob, and a file:// URI."""
    shards = tmp_path / "shards"
    shards.mkdir()
    rows = [{"id": f"r{number}", "text": f"row {number} of a corpus"} for number in range(9)]
    for index, name in enumerate(["a.jsonl", "b.JSONL", "c.jsonl"]):
        lines = "".join(json.dumps(row) + "\n" for row in rows[index * 3 : index * 3 + 3])
        (shards / name).write_text(lines, encoding="utf8")
    (shards / "_SUCCESS").write_text("", encoding="utf8")  # a marker a folder's reader skips
    outputs = {}
    for form, source in {
        "folder": shards,
        "glob": shards / "*.*",
        "uri": f"file://{shards}",
    }.items():
        outputs[form] = tmp_path / f"out-{form}"
        summary = invoke(["embed", bilm_path, source, outputs[form], "--engine", "ray", "--batch-size", "2"])
        assert "Wrote 9 rows" in summary, form
    want = rows_by_id(outputs["folder"])
    assert sorted(want) == sorted(row["id"] for row in rows)
    for form in ("glob", "uri"):
        assert_same_rows(rows_by_id(outputs[form]), want)
    uri_output = f"file://{tmp_path}/out-as-uri"
    invoke(["embed", bilm_path, shards, uri_output, "--engine", "ray"])
    assert rows_by_id(tmp_path / "out-as-uri").keys() == want.keys()


def test_text_shards_are_numbered_by_file_and_line(ray_cluster, bilm_path, tmp_path):
    shards = tmp_path / "text"
    shards.mkdir()
    (shards / "one.txt").write_text("first line\n\nthird line\n", encoding="utf8")
    (shards / "two.txt").write_text("only line\n", encoding="utf8")
    invoke(["embed", bilm_path, shards, tmp_path / "out", "--engine", "ray"])
    got = rows_by_id(tmp_path / "out")
    assert sorted(got) == ["one.txt:1", "one.txt:2", "one.txt:3", "two.txt:1"]
    assert got["one.txt:2"]["tokens"] == [] and got["two.txt:1"]["tokens"] == ["only", "line"]


def test_every_output_file_says_how_it_was_made(ray_cluster, bilm_path, tmp_path):
    """Provenance in each Parquet file's schema metadata; `auto` measured once, one plan for all."""
    corpus = corpus_file(tmp_path, rows=16)
    invoke(
        [
            "embed",
            bilm_path,
            corpus,
            tmp_path / "auto",
            "--engine",
            "ray",
            "--rows-per-file",
            "4",
            "--precision",
            "auto",
        ]
    )
    invoke(
        [
            "embed",
            bilm_path,
            corpus,
            tmp_path / "int8",
            "--engine",
            "ray",
            "--layers",
            "top",
            "--precision",
            "int8",
        ]
    )
    weights = hashlib.sha256((bilm_path / "model.safetensors").read_bytes()).hexdigest()
    plans = []
    for name, layers in (("auto", "average"), ("int8", "top")):
        files = sorted((tmp_path / name).glob("*.parquet"))
        assert len(files) == (4 if name == "auto" else 1)
        for file in files:
            provenance = read_provenance(file)
            assert provenance["version"] == __import__("spacy_elmo").__version__
            assert provenance["model"] == {"kind": "bilm", "name": str(bilm_path), "sha256": weights}
            assert provenance["layers"] == layers
            if name == "int8":
                assert provenance["precision"] == "int8"
            else:
                plans.append(provenance["precision"])
    assert all(plan == plans[0] for plan in plans)
    assert isinstance(plans[0], dict) and "lstm.layers.0.recurrent" in "".join(plans[0])
    assert all(mode in ("fp32", "bf16", "int8") for buckets in plans[0].values() for _, mode in buckets)


# -- nothing lost: outputs never over inputs, one writer at a time, one id type ------------------


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_force_never_deletes_an_input_inside_the_output(
    ray_cluster, bilm_path, pipeline_path, tmp_path, engine
):
    folder = tmp_path / "d"
    folder.mkdir()
    corpus = folder / "corpus.jsonl"
    corpus.write_text('{"id": 1, "text": "a b"}\n', encoding="utf8")
    (folder / "notes.txt").write_text("unrelated", encoding="utf8")
    result = runner.invoke(
        app, ["annotate", str(pipeline_path), str(corpus), str(folder), "--engine", engine, "--force"]
    )
    assert result.exit_code == 1
    assert f"The output {folder} holds the input file {corpus}" in result.output
    assert corpus.exists() and (folder / "notes.txt").read_text(encoding="utf8") == "unrelated"


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_force_never_deletes_an_input_through_a_symbolic_link(ray_cluster, pipeline_path, tmp_path, engine):
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "a.txt").write_text("a b\n", encoding="utf8")
    link = tmp_path / "link"
    link.symlink_to(shards, target_is_directory=True)
    result = runner.invoke(
        app, ["annotate", str(pipeline_path), str(shards / "a.txt"), str(link), "--engine", engine, "--force"]
    )
    assert result.exit_code == 1 and "holds the input file" in result.output
    assert (shards / "a.txt").read_text(encoding="utf8") == "a b\n"


def test_an_output_inside_an_input_folder_is_refused(ray_cluster, bilm_path, tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    pyarrow.parquet.write_table(pyarrow.table({"id": [1], "text": ["a b"]}), shards / "a.parquet")
    result = runner.invoke(
        app, ["embed", str(bilm_path), str(shards), str(shards / "out"), "--engine", "ray"]
    )
    assert result.exit_code == 1 and "lies inside the input folder" in result.output
    assert sorted(path.name for path in shards.iterdir()) == ["a.parquet"]


def test_ids_of_two_types_are_refused_not_pickled(ray_cluster, bilm_path, tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "a.jsonl").write_text('{"id": 1, "text": "a b"}\n', encoding="utf8")
    (shards / "b.jsonl").write_text('{"id": "x", "text": "c"}\n', encoding="utf8")
    result = runner.invoke(
        app, ["embed", str(bilm_path), str(shards), str(tmp_path / "out"), "--engine", "ray"]
    )
    assert result.exit_code == 1
    assert "ids are of mixed types (a.jsonl has integer ids, b.jsonl has string ids)" in result.output
    assert "run the same command with --resume" in result.output and not (tmp_path / "out").exists()
    for bad, what in (('{"id": [1], "text": "a"}', "is a list"), ('{"id": true, "text": "a"}', "is a bool")):
        (shards / "b.jsonl").write_text(bad + "\n", encoding="utf8")
        result = runner.invoke(
            app, ["embed", str(bilm_path), str(shards), str(tmp_path / "out"), "--engine", "ray", "--force"]
        )
        assert result.exit_code == 1 and "b.jsonl, line 1: id " in result.output and what in result.output
    (shards / "b.jsonl").write_text('{"id": 2, "text": "c"}\n', encoding="utf8")  # fixed: the file is redone
    invoke(["embed", bilm_path, shards, tmp_path / "out", "--engine", "ray", "--resume"])
    assert sorted(rows_by_id(tmp_path / "out")) == [1, 2]


def test_a_cluster_that_is_not_there_is_one_line_within_seconds(bilm_path, tmp_path):
    corpus = corpus_file(tmp_path, rows=2)
    for address, expected in (
        ("127.0.0.1:6999", "Cannot join the Ray cluster at 127.0.0.1:6999: nothing answers there"),
        ("not a host:::", "--address 'not a host:::' is not HOST:PORT"),
    ):
        started = time.monotonic()
        result = subprocess.run(
            command("embed", bilm_path, corpus, tmp_path / "out", "--engine", "ray", "--address", address),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert time.monotonic() - started < 30
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"Error: {expected}")
        assert not (tmp_path / ".out.spacy-elmo-run").exists()


def test_a_ray_run_prints_our_lines_only_and_names_rays_log_when_it_fails(ray_cluster, bilm_path, tmp_path):
    """Ray's own output (its log-level line, its warnings, a worker's traceback) goes to a log file:
    a run that works prints nothing but our bar and summary; one that fails prints our one line
    and where Ray's messages are, from a process that starts its own cluster as a user's does."""
    corpus = corpus_file(tmp_path, rows=4)
    done = subprocess.run(
        command("embed", bilm_path, corpus, tmp_path / "out", "--engine", "ray"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Wrote 4 rows") and done.stderr == ""  # no bar: not a terminal
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "tokens": ["x", 7]}\n', encoding="utf8")
    failed = subprocess.run(
        command("embed", bilm_path, bad, tmp_path / "bad-out", "--engine", "ray"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    lines = failed.stderr.strip().splitlines()
    assert failed.returncode == 1 and len(lines) == 1, failed.stderr
    assert lines[0].startswith("Error: bad.jsonl, line 2: row id 'b': column \"tokens\" holds ['x', 7]")
    log = Path(lines[0].rsplit("(Ray's own messages: ", 1)[1].rstrip(")"))
    assert log.is_file() and "Traceback" in log.read_text(encoding="utf8")


MISTAKEN_MODEL = """
import sys
import ray
from spacy_elmo.bilm.errors import ConfigError
from spacy_elmo.corpus import run_corpus

pipeline, corpus, output = sys.argv[1:4]
try:
    run_corpus(corpus, output, model=pipeline, engine="ray")
except ConfigError as error:
    print(str(error).splitlines()[0])
print("ray started:", ray.is_initialized())
"""


def test_a_pipeline_given_as_the_biLM_is_named_before_a_cluster_starts(pipeline_path, tmp_path):
    """Starting a cluster takes seconds: a model that cannot serve the run is found first."""
    arguments = [str(pipeline_path), str(corpus_file(tmp_path)), str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", MISTAKEN_MODEL, *arguments], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{pipeline_path} is a spaCy pipeline, not a biLM. Give the biLM it was trained with; "
        "`spacy-elmo annotate PIPELINE INPUT OUTPUT` is the command that runs a pipeline.",
        "ray started: False",
    ]


def test_resume_sees_a_file_rewritten_at_its_size_and_takes_other_spellings(ray_cluster, bilm_path, tmp_path):
    """Killed once parts are written; the input file is then rewritten at the same size with other
    text. `--resume`, given the input as `./big/` (it was `big`, absolute) and a copy of the model,
    computes the file again: the output holds the new text's rows only. Before, the changed file
    kept its stale parts (a change was a change of size), and the other spellings were refused as
    another input and another model."""
    folder = tmp_path / "big"
    folder.mkdir()
    corpus = corpus_file(folder)
    run_folder = tmp_path / ".out.spacy-elmo-run"
    options = ["--engine", "ray", "--workers", "2", "--rows-per-file", "2"]
    arguments = ["embed", bilm_path, folder, tmp_path / "out", *options]
    kept = killed_run(arguments, ray_cluster, run_folder, parts=3)
    assert 3 <= len(kept) < ROWS // 2, "the run ended before it was killed"
    rewritten = corpus.read_text(encoding="utf8").replace("row", "wor")
    assert len(rewritten.encode("utf8")) == corpus.stat().st_size
    corpus.write_text(rewritten, encoding="utf8")
    model_copy = tmp_path / "model copy"
    model_copy.mkdir()
    for file in bilm_path.iterdir():
        (model_copy / file.name).write_bytes(file.read_bytes())
    resumed = subprocess.run(
        command("embed", model_copy, "./big/", "out", *options, "--resume", "--address", ray_cluster),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.startswith(f"Wrote {ROWS} rows")
    texts = sorted(" ".join(row["tokens"]) for row in rows_by_id(tmp_path / "out").values())
    assert texts == sorted(f"wor {number} of a corpus" for number in range(ROWS))
