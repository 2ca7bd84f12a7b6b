"""The completeness check of a run folder (`corpus.ray.layout.check_files`, which a Ray task runs) on
folders built by hand, without a cluster: each block's part must hold its rows and be made with
the run's model, layers and precision plan; a wrong part is deleted so that `--resume` writes it
again, and the parts that are right are left as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq

from spacy_elmo.corpus.provenance import PROVENANCE_KEY, provenance, schema_metadata, vector_facts
from spacy_elmo.corpus.ray.layout import PART_KEY, MadeWith, check_files, manifest_path, part_path
from spacy_elmo.corpus.ray.run_folder import ids_digest

MODEL = {"kind": "bilm", "name": "tiny", "sha256": "0" * 64}
PLAN = {"lstm.input": [[0, "fp32"], [16, "bf16"]]}
BLOCKS = [[0, 1, 2], [3, 4], [5, 6, 7]]  # ids of each block of one input file


def made(**changes: object) -> dict:
    return {**provenance(MODEL, "average", PLAN), **changes}


def write_part(run: Path, block: int, ids: list[int], record: dict) -> Path:
    table = pa.table({"id": ids, "tokens": [["a", "b"]] * len(ids)})
    part = {"rows": len(ids), "ids": ids_digest(ids), "tokens": 2 * len(ids)}
    path = Path(part_path(str(run), 0, block))
    pq.write_table(
        table.replace_schema_metadata({PART_KEY: json.dumps(part).encode(), **schema_metadata(record)}), path
    )
    return path


def run_folder(tmp_path: Path) -> Path:
    """A run of one input file of three blocks, every part written by this run."""
    run = tmp_path / ".out.spacy-elmo-run"
    (run / "parts").mkdir(parents=True)
    (run / "manifests").mkdir()
    blocks = [[len(ids), ids_digest(ids)] for ids in BLOCKS]
    manifest = {"name": "corpus.txt", "parts": blocks, "id_kind": "int"}
    Path(manifest_path(str(run), 0)).write_text(json.dumps(manifest), encoding="utf8")
    for block, ids in enumerate(BLOCKS):
        write_part(run, block, ids, made())
    return run


def checked(run: Path) -> dict:
    made_with = MadeWith(PROVENANCE_KEY.encode(), vector_facts(made()))
    return check_files(pyarrow.fs.LocalFileSystem(), str(run), [0], made_with)[0]


def test_a_complete_run_passes_and_counts_its_rows_and_tokens(tmp_path):
    result = checked(run_folder(tmp_path))
    assert result == {"rows": 8, "tokens": 16, "id_kind": "int", "problems": []}


def test_a_part_made_with_another_precision_plan_is_named_and_deleted(tmp_path):
    """As a writer of an earlier run leaves it: same rows and ids, other vectors."""
    run = run_folder(tmp_path)
    stale = write_part(run, 1, BLOCKS[1], made(precision="int8"))
    kept = {path: path.stat().st_mtime_ns for path in (run / "parts").iterdir() if path != stale}
    result = checked(run)
    assert result["problems"] == [
        "corpus.txt, part 1: the part was made with another model, layers or precision "
        "(by an earlier run's writer); deleted"
    ]
    assert (result["rows"], result["tokens"]) == (6, 12)
    assert not stale.exists()
    assert {path: path.stat().st_mtime_ns for path in (run / "parts").iterdir()} == kept


def test_a_part_made_with_another_model_or_layers_is_deleted(tmp_path):
    run = run_folder(tmp_path)
    other_model = write_part(run, 0, BLOCKS[0], made(model={**MODEL, "sha256": "1" * 64}))
    other_layers = write_part(run, 2, BLOCKS[2], made(layers="top"))
    assert len(checked(run)["problems"]) == 2
    assert not other_model.exists() and not other_layers.exists()


def test_a_part_of_another_version_that_made_the_same_vectors_is_kept(tmp_path):
    """A run resumed after upgrading spacy-elmo keeps the parts it wrote before."""
    run = run_folder(tmp_path)
    earlier = write_part(run, 1, BLOCKS[1], made(version="0.0.9"))
    assert checked(run)["problems"] == [] and earlier.exists()


def test_a_part_with_other_rows_or_no_parquet_is_deleted_and_a_missing_one_named(tmp_path):
    run = run_folder(tmp_path)
    other_rows = write_part(run, 0, BLOCKS[1], made())
    not_parquet = Path(part_path(str(run), 0, 1))
    not_parquet.write_bytes(b"cut off")
    Path(part_path(str(run), 0, 2)).unlink()
    problems = checked(run)["problems"]
    assert problems[0] == "corpus.txt, part 0: the part holds 2 rows for 3 input rows, or other ids; deleted"
    assert problems[1].startswith("corpus.txt, part 1: no output part (") and problems[1].endswith(
        "; deleted"
    )
    assert problems[2].startswith("corpus.txt, part 2: no output part (") and not problems[2].endswith(
        "deleted"
    )
    assert not other_rows.exists() and not not_parquet.exists()
