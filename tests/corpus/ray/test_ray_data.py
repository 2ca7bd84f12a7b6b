"""`ElmoMapper` and `--engine ray` on a real local Ray cluster: the vectors equal `nlp.pipe` in one
process in any row order, annotations equal the pipeline's, both engines of both commands agree,
bad rows are named by id and column, and a killed worker costs no row."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from typer.testing import CliRunner

from spacy_elmo.cli import app

from ...waiting import wait_for

ray = pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')
pytest.importorskip("pyarrow")
import pyarrow  # noqa: E402
import pyarrow.parquet  # noqa: E402

from spacy_elmo.ray_data import ElmoMapper  # noqa: E402

pytestmark = pytest.mark.slow  # every test starts Ray actors: 5 to 45 s each
runner = CliRunner()
TOLERANCE = 1e-5
TEXTS = [
    "Alice moved to Berlin last year.",
    "Bob works for Acme in Paris.",
    "",
    "   ",
    "Ok",
    "Carol visited London with Dave and the river bank was quiet.",
]


def embedding_nlp(bilm_path: Path) -> Language:
    """The in-process reference: a blank pipeline holding the elmo component with the same biLM."""
    nlp = spacy.blank("xx")
    nlp.add_pipe("elmo")
    nlp.config["initialize"]["components"]["elmo"] = {
        "loader": {"@misc": "spacy-elmo.ModelDir.v1", "path": str(bilm_path)}
    }
    nlp.initialize()
    return nlp


def collect(dataset) -> dict:
    """Output rows by id."""
    table = pyarrow.concat_tables(ray.get(dataset.to_arrow_refs()))
    return {row["id"]: row for row in table.to_pylist()}


def map_rows(rows: list[dict], **mapper_kwargs: object) -> dict:
    dataset = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
        ElmoMapper,
        fn_constructor_kwargs=mapper_kwargs,
        batch_size=2,
        compute=ray.data.ActorPoolStrategy(size=2),
    )
    return collect(dataset)


def test_mapper_gives_the_vectors_of_nlp_pipe_in_any_row_order(ray_cluster, bilm_path):
    long_row = " ".join(f"w{index}" for index in range(300))  # over max_length: the component's windows
    rows = [{"id": f"t{index}", "text": text} for index, text in enumerate([*TEXTS, long_row])]
    random.Random(0).shuffle(rows)
    tokenised = [{"id": "k0", "tokens": ["Pre", "tokenised", ","]}, {"id": "k1", "tokens": []}]
    nlp = embedding_nlp(bilm_path)
    for batch in (rows, tokenised):
        output = map_rows(batch, model=str(bilm_path), layers="all")
        assert sorted(output) == sorted(row["id"] for row in batch)
        for row in batch:
            words = row["tokens"] if "tokens" in row else row["text"].split()
            want = nlp(Doc(nlp.vocab, words=words))._.elmo.layers
            got = np.asarray(output[row["id"]]["vectors"], dtype=np.float32).reshape(want.shape)
            assert output[row["id"]]["tokens"] == words
            assert len(output[row["id"]]["vectors"]) == want.shape[0]  # (L + 1) lists of n vectors
            np.testing.assert_allclose(got, want, atol=TOLERANCE, rtol=0)


def test_mapper_annotates_as_the_pipeline_does(ray_cluster, pipeline_path):
    nlp = spacy.load(pipeline_path)
    rows = [{"id": index, "text": text, "source": f"doc-{index}"} for index, text in enumerate(TEXTS)]
    output = map_rows(rows, pipeline=str(pipeline_path), docbin=True)
    assert sum(len(row["ents"]) for row in output.values()) > 0, "the pipeline should find entities"
    for row in rows:
        got = output[row["id"]]
        assert got["source"] == row["source"] and got["text"] == row["text"]
        want = nlp(row["text"]) if row["text"].strip() else nlp(Doc(nlp.vocab, words=[]))
        assert got["tokens"] == [token.text for token in want]
        assert got["ents"] == [{"start": e.start, "end": e.end, "label": e.label_} for e in want.ents]
        assert got["heads"] == [token.head.i for token in want]
        assert got["deps"] == [token.dep_ for token in want]
        mixed = np.asarray(got["vectors"], dtype=np.float32).reshape(want._.elmo.mixed.shape)
        np.testing.assert_allclose(mixed, want._.elmo.mixed, atol=TOLERANCE, rtol=0)
        (from_bytes,) = DocBin().from_bytes(got["docbin"]).get_docs(nlp.vocab)
        np.testing.assert_allclose(from_bytes._.elmo.layers, want._.elmo.layers, atol=TOLERANCE, rtol=0)


def test_a_bad_row_is_named_by_its_id_and_column(ray_cluster, bilm_path):
    rows = [{"id": "bad-7", "text": 42}]  # a column of the wrong type
    with pytest.raises(ray.exceptions.RayError, match=r"row id 'bad-7': column \"text\" holds 42 \(int\)"):
        map_rows(rows, model=str(bilm_path))


def write_corpus(folder: Path) -> dict[str, Path]:
    """The same rows as a text file, JSONL and Parquet; ids are the text file's line numbers."""
    folder.mkdir(exist_ok=True)
    text = folder / "corpus.txt"
    text.write_text("".join(f"{line}\n" for line in TEXTS), encoding="utf8")
    rows = [{"id": number, "text": line} for number, line in enumerate(TEXTS, start=1)]
    jsonl = folder / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf8")
    parquet = folder / "corpus.parquet"
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), parquet)
    return {"text": text, "jsonl": jsonl, "parquet": parquet}


def invoke(*arguments: object) -> str:
    result = runner.invoke(app, [str(argument) for argument in arguments])
    assert result.exit_code == 0, result.output
    return result.output


def test_embed_on_ray_writes_the_local_engines_vectors_for_every_input_kind(ray_cluster, bilm_path, tmp_path):
    corpus = write_corpus(tmp_path / "in")
    local_input = tmp_path / "in" / "nonempty.txt"
    local_input.write_text("".join(f"{line}\n" for line in TEXTS if line.strip()), encoding="utf8")
    invoke("embed", bilm_path, local_input, tmp_path / "local.hdf5", "--layers", "average")
    with h5py.File(tmp_path / "local.hdf5") as handle:
        local = {
            " ".join(line.split()): handle[str(index)][()]  # AllenNLP's keys: the first line's is "0"
            for index, line in enumerate(line for line in TEXTS if line.strip())
        }
    for kind, path in corpus.items():
        output = tmp_path / f"ray-{kind}"
        summary = invoke(
            "embed", bilm_path, path, output, "--engine", "ray", "--workers", "2", "--layers", "average"
        )
        assert "Wrote 6 rows (" in summary and "on 2 Ray workers" in summary
        plain_folder = tmp_path / f"mkdir-{kind}"
        plain_folder.mkdir()  # the umask's folder mode (pytest's tmp_path itself is private)
        assert stat.S_IMODE(output.stat().st_mode) == stat.S_IMODE(plain_folder.stat().st_mode)
        rows = {row["id"]: row for row in pyarrow.parquet.read_table(output).to_pylist()}
        assert sorted(rows) == list(range(1, len(TEXTS) + 1))
        for number, line in enumerate(TEXTS, start=1):
            got = np.asarray(rows[number]["vectors"], dtype=np.float32).reshape(-1, 16)
            if not line.strip():
                assert rows[number]["tokens"] == [] and got.size == 0
                continue
            np.testing.assert_allclose(got, local[" ".join(line.split())], atol=TOLERANCE, rtol=0)


def test_annotate_gives_the_same_rows_on_both_engines(ray_cluster, pipeline_path, tmp_path):
    corpus = write_corpus(tmp_path / "in")
    invoke("annotate", pipeline_path, corpus["jsonl"], tmp_path / "local.jsonl")
    local = {}
    for line in (tmp_path / "local.jsonl").read_text(encoding="utf8").splitlines():
        row = json.loads(line)
        local[row["id"]] = row
    assert list(local) == list(range(1, len(TEXTS) + 1))  # the local engine keeps the input order
    for kind in ("text", "parquet"):
        output = tmp_path / f"ray-{kind}"
        invoke("annotate", pipeline_path, corpus[kind], output, "--engine", "ray", "--workers", "2")
        rows = {row["id"]: row for row in pyarrow.parquet.read_table(output).to_pylist()}
        assert sorted(rows) == sorted(local)
        for row_id, want in local.items():
            got = rows[row_id]
            for column in ("text", "tokens", "ents", "heads", "deps"):
                assert got[column] == want[column], (row_id, column)
            np.testing.assert_allclose(
                np.asarray(got["vectors"], dtype=np.float32).reshape(-1, 16),
                np.asarray(want["vectors"], dtype=np.float32).reshape(-1, 16),
                atol=TOLERANCE,
                rtol=0,
            )


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_annotate_names_a_bad_parquet_row_and_refuses_an_empty_input(
    ray_cluster, pipeline_path, tmp_path, engine
):
    bad = tmp_path / "bad.parquet"
    pyarrow.parquet.write_table(pyarrow.table({"id": ["a", "b"], "text": ["fine", None]}), bad)
    result = runner.invoke(
        app, ["annotate", str(pipeline_path), str(bad), str(tmp_path / "out"), "--engine", engine]
    )
    assert result.exit_code == 1
    assert 'row id \'b\' has neither "text" nor "tokens"' in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf8")
    result = runner.invoke(
        app, ["annotate", str(pipeline_path), str(empty), str(tmp_path / "out"), "--engine", engine]
    )
    assert result.exit_code == 1 and f"Input {empty} has no rows" in result.output


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_bad_jsonl_row_is_named_by_its_file_line_and_column(ray_cluster, pipeline_path, tmp_path, engine):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "x1", "text": "fine"}\n{"id": "x2", "tokens": ["a", 3]}\n', encoding="utf8")
    output = tmp_path / "out"
    result = runner.invoke(
        app, ["annotate", str(pipeline_path), str(corpus), str(output), "--engine", engine]
    )
    assert result.exit_code == 1
    assert "row id 'x2': column \"tokens\" holds ['a', 3] (list), not a list of strings" in result.output
    assert "Traceback" not in result.output and not output.exists()


# -- faults: Ray restarts what dies, and the output still holds every row exactly once ---------

FAULT_ROWS = 150
FAULT_TIMEOUT_S = 300


def fault_corpus(folder: Path) -> Path:
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(f"row {number} of a corpus\n" for number in range(FAULT_ROWS)), encoding="utf8")
    return corpus


def written_ids(folder: Path) -> list:
    return sorted(pyarrow.parquet.read_table(folder, columns=["id"]).column("id").to_pylist())


def mapper_pids() -> set[int]:
    """Processes whose title names the run's writers (Ray titles its actors
    `ray::MapWorker(MapBatches(PartWriter))`)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"PartWriter" in (entry / "cmdline").read_bytes():
                pids.add(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker in /proc (Linux)")
def test_a_killed_worker_is_restarted_and_every_row_is_written_once(ray_cluster, bilm_path, tmp_path):
    """`embed --engine ray --address` in a subprocess on the test's cluster; once some rows are
    written, one ElmoMapper actor gets SIGKILL."""
    output = tmp_path / "out"
    arguments = ["embed", bilm_path, fault_corpus(tmp_path), output, "--engine", "ray", "--workers", "2"]
    arguments += ["--rows-per-file", "1", "--address", ray_cluster]
    earlier = mapper_pids()
    process = subprocess.Popen(
        [sys.executable, "-m", "spacy_elmo", *map(str, arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def running_mapper() -> int | None:
            if not list(tmp_path.glob(".out.spacy-elmo-run/parts/*.parquet")):
                return None
            return next(iter(mapper_pids() - earlier), None)

        victim = wait_for(running_mapper, "a PartWriter actor that has written rows")
        os.kill(victim, signal.SIGKILL)
        assert process.poll() is None, "the run ended before the worker was killed"
        stdout, stderr = process.communicate(timeout=FAULT_TIMEOUT_S)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert f"Wrote {FAULT_ROWS} rows" in stdout
    assert written_ids(output) == list(range(1, FAULT_ROWS + 1))


NODE_REMOVAL_SCRIPT = """
import sys, threading, time
import ray, pyarrow.parquet
from ray.cluster_utils import Cluster
from spacy_elmo.ray_data import ElmoMapper

bilm, output, n_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
node = cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
ray.init(address=cluster.address, log_to_driver=False)
rows = [{"id": n, "text": f"row {n} of a corpus"} for n in range(n_rows)]
dataset = ray.data.from_items(rows, override_num_blocks=n_rows).map_batches(
    ElmoMapper, fn_constructor_kwargs={"model": bilm}, batch_size=1, num_cpus=1,
    compute=ray.data.ActorPoolStrategy(size=2),  # one actor per node: each has one CPU
)
removed = threading.Event()

def remove_node_once_rows_are_written():
    while not glob_parquet():
        time.sleep(0.05)
    cluster.remove_node(node)
    removed.set()

def glob_parquet():
    import pathlib
    return list(pathlib.Path(output).glob("*.parquet"))

threading.Thread(target=remove_node_once_rows_are_written, daemon=True).start()
dataset.write_parquet(output)
print("removed mid-run:", removed.is_set())
ids = pyarrow.parquet.read_table(output, columns=["id"]).column("id").to_pylist()
print("rows:", len(ids), "distinct:", len(set(ids)))
ray.shutdown()
cluster.shutdown()
"""


def test_a_node_removed_mid_run_costs_no_row(bilm_path, tmp_path):
    """A two-node cluster (`ray.cluster_utils.Cluster`, in a subprocess: this process is joined to
    the session's cluster); the node of one actor is removed once some rows are written."""
    script = tmp_path / "node_removal.py"
    script.write_text(NODE_REMOVAL_SCRIPT, encoding="utf8")
    result = subprocess.run(
        [sys.executable, str(script), str(bilm_path), str(tmp_path / "out"), str(FAULT_ROWS)],
        capture_output=True,
        text=True,
        timeout=FAULT_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "removed mid-run: True" in result.stdout
    assert f"rows: {FAULT_ROWS} distinct: {FAULT_ROWS}" in result.stdout
    assert written_ids(tmp_path / "out") == list(range(FAULT_ROWS))
