"""`run_corpus` given a `ray.data.Dataset` instead of a path, on the tests' local Ray cluster: the
same rows as the same corpus read from its file, every id once, provenance on every part; what a
Dataset cannot do (resume, rows without an id) is refused in one line; a Dataset that repeats a
batch of ids is caught by the completeness check, and nothing is published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')

import pyarrow  # noqa: E402
import pyarrow.parquet  # noqa: E402

from spacy_elmo.bilm.errors import ConfigError  # noqa: E402
from spacy_elmo.corpus import run_corpus  # noqa: E402
from spacy_elmo.corpus.outputs import OutputPathError  # noqa: E402
from spacy_elmo.corpus.provenance import read_provenance  # noqa: E402
from spacy_elmo.corpus.ray.cluster import RayEngineError  # noqa: E402
from spacy_elmo.corpus.ray.run_folder import RunFolderError  # noqa: E402

from .test_scale import assert_same_rows, rows_by_id  # noqa: E402

pytestmark = pytest.mark.slow  # Ray actors: 10 to 30 s each
ROWS = 30


def parquet_corpus(folder: Path) -> Path:
    """Rows with text, one with tokens instead, and a column that passes through."""
    rows = [
        {"id": f"r{n}", "text": f"row {n} of a corpus", "tokens": None, "source": "test"} for n in range(ROWS)
    ]
    rows[3] = {"id": "r3", "text": None, "tokens": ["pre", "tokenised"], "source": "test"}
    pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), folder / "corpus.parquet")
    return folder / "corpus.parquet"


def test_a_dataset_gives_the_rows_its_file_gives(ray_cluster, bilm_path, tmp_path):
    """read_parquet's read tasks need a CPU of their own: the default leaves them one."""
    corpus = parquet_corpus(tmp_path)
    from_file = run_corpus(corpus, tmp_path / "from-file", model=bilm_path, batch_size=4, engine="ray")
    dataset = ray.data.read_parquet(str(corpus))
    summary = run_corpus(
        dataset, tmp_path / "from-dataset", model=bilm_path, rows_per_file=4, engine="ray"
    )  # 1 worker
    assert (summary.rows, summary.tokens) == (from_file.rows, from_file.tokens)
    assert summary.rows == ROWS
    got = rows_by_id(tmp_path / "from-dataset")
    assert_same_rows(got, rows_by_id(tmp_path / "from-file"))
    assert got["r3"]["tokens"] == ["pre", "tokenised"] and got["r7"]["source"] == "test"
    parts = sorted((tmp_path / "from-dataset").glob("part-*.parquet"))
    assert len(parts) >= ROWS // 4  # batches of at most 4 rows, each its own part
    provenance = {json.dumps(read_provenance(part), sort_keys=True) for part in parts}
    file_part = next((tmp_path / "from-file").glob("part-*.parquet"))
    assert provenance == {json.dumps(read_provenance(file_part), sort_keys=True)}
    assert not (tmp_path / ".from-dataset.spacy-elmo-run").exists()


def test_what_a_dataset_cannot_do_is_refused_in_one_line(ray_cluster, bilm_path, tmp_path):
    dataset = ray.data.from_items([{"id": 1, "text": "a b"}])
    with pytest.raises(ConfigError, match=r"resume=True needs files that run_corpus reads itself"):
        run_corpus(dataset, tmp_path / "out", model=bilm_path, resume=True, engine="ray")
    with pytest.raises(ConfigError, match=r"workers=2: the cluster has 2 CPUs, .* give workers=1 or fewer"):
        run_corpus(dataset, tmp_path / "out", model=bilm_path, workers=2, engine="ray")
    with pytest.raises(ConfigError, match=r"input_format='jsonl' reads files"):
        run_corpus(dataset, tmp_path / "out", model=bilm_path, input_format="jsonl", engine="ray")
    with pytest.raises(ConfigError, match=r"reads a path, a URI or a ray.data.Dataset, not a list"):
        run_corpus([{"id": 1, "text": "a b"}], tmp_path / "out", model=bilm_path, engine="ray")
    without_ids = ray.data.from_items([{"text": "a b"}, {"text": "c"}])
    with pytest.raises(RayEngineError) as raised:
        run_corpus(without_ids, tmp_path / "out", model=bilm_path, engine="ray")
    assert str(raised.value) == (
        "The Dataset's rows have the columns text: run_corpus needs an id column (integers or strings, "
        'one per row) and "text" (a string) or "tokens" (a list of strings).'
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.spacy-elmo-run").exists()


def test_a_dataset_that_repeats_a_batch_of_ids_is_not_published(ray_cluster, bilm_path, tmp_path):
    """Two batches with the same ids in the same order would be one part: the check counts them;
    nothing is published and nothing is left (a Dataset's run cannot be resumed)."""
    rows = [{"id": n % 2, "text": f"row {n}"} for n in range(4)]  # batches of 2: ids [0, 1] twice
    dataset = ray.data.from_items(rows, override_num_blocks=2)
    with pytest.raises(RunFolderError, match=r"handed 2 batches, of which 1 are distinct") as raised:
        run_corpus(dataset, tmp_path / "out", model=bilm_path, rows_per_file=2, engine="ray")
    assert "nothing was moved to the output" in str(raised.value) and "--resume" not in str(raised.value)
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.spacy-elmo-run").exists()


def test_an_unfinished_run_in_the_way_of_a_dataset_is_discarded_only_with_force(
    ray_cluster, bilm_path, tmp_path
):
    """What a command killed mid-run leaves (its run file and a written part)."""
    parts = tmp_path / ".out.spacy-elmo-run" / "parts"
    parts.mkdir(parents=True)
    (parts.parent / "run.json").write_text("{}", encoding="utf8")
    (parts / "part-000000-000000000.parquet").write_bytes(b"")
    dataset = ray.data.from_items([{"id": 1, "text": "a b"}])
    with pytest.raises(RunFolderError, match=r"a Dataset's run cannot continue it: pass force=True"):
        run_corpus(dataset, tmp_path / "out", model=bilm_path, engine="ray")
    summary = run_corpus(dataset, tmp_path / "out", model=bilm_path, force=True, engine="ray")
    assert summary.rows == 1 and sorted(rows_by_id(tmp_path / "out")) == [1]


def test_a_dataset_never_deletes_its_own_input_even_with_force(ray_cluster, bilm_path, tmp_path):
    """With the Dataset's folder as the output, force=True deleted the folder and the file the
    Dataset reads; as a path, the same call is refused."""
    folder = tmp_path / "dsin"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": 1, "text": "a b"}\n', encoding="utf8")
    dataset = ray.data.read_json(str(folder), lines=True)
    for output in (folder, folder / "a.jsonl"):
        with pytest.raises(OutputPathError, match=r"(is|holds) the input file .*a\.jsonl: writing it"):
            run_corpus(dataset, output, model=bilm_path, force=True, engine="ray")
    assert (folder / "a.jsonl").read_text(encoding="utf8") == '{"id": 1, "text": "a b"}\n'
    assert sorted(path.name for path in tmp_path.iterdir()) == ["dsin"]
