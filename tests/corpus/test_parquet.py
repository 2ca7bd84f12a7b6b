"""Our Parquet outputs write float vectors without a dictionary or statistics (both cost time and
space for vectors and help nobody) and every other column as Parquet's defaults have it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq
import pytest

from spacy_elmo.corpus.local.tables import write_parquet
from spacy_elmo.corpus.parquet import holds_floats
from spacy_elmo.corpus.ray.run_folder import RunFolder


def vectors_table(rows: int = 32, width: int = 16) -> pa.Table:
    vectors = np.random.default_rng(0).standard_normal((rows, 3, width)).astype("float32")
    return pa.table(
        {
            "id": list(range(rows)),
            "tokens": [["a", "b", "c"]] * rows,
            "vectors": pa.array(list(vectors.tolist()), type=pa.list_(pa.list_(pa.float32(), width))),
        }
    )


def column_chunks(path: Path) -> dict[str, pq.ColumnChunkMetaData]:
    row_group = pq.ParquetFile(path).metadata.row_group(0)
    chunks = [row_group.column(index) for index in range(row_group.num_columns)]
    return {chunk.path_in_schema.partition(".")[0]: chunk for chunk in chunks}


def check_plain_vectors(path: Path, table: pa.Table) -> None:
    assert pq.read_table(path).select(table.schema.names).equals(table)
    chunks = column_chunks(path)
    assert not chunks["vectors"].has_dictionary_page and not chunks["vectors"].is_stats_set
    assert chunks["id"].is_stats_set and chunks["tokens"].has_dictionary_page


@pytest.mark.parametrize(
    ("data_type", "expected"),
    [
        (pa.float32(), True),
        (pa.list_(pa.list_(pa.float16(), 4)), True),
        (pa.large_list(pa.list_(pa.list_(pa.float64()))), True),
        (pa.list_(pa.string()), False),
        (pa.int64(), False),
    ],
)
def test_float_columns_are_found_at_any_depth_of_lists(data_type, expected):
    assert holds_floats(data_type) is expected


def test_a_ray_runs_part_has_plain_vectors(tmp_path):
    run_folder = RunFolder(pyarrow.fs.LocalFileSystem(), str(tmp_path / "out"))
    Path(run_folder.parts).mkdir(parents=True)
    table = vectors_table()
    run_folder.write_part("part-0.parquet", [table])
    check_plain_vectors(Path(run_folder.parts) / "part-0.parquet", table)


def test_a_local_runs_parquet_file_has_plain_vectors(tmp_path):
    table = vectors_table()
    write_parquet(iter([table.slice(0, 16), table.slice(16)]), tmp_path / "out.parquet", {b"k": b"v"})
    check_plain_vectors(tmp_path / "out.parquet", table)


def test_a_killed_writers_temporary_file_never_reaches_the_output(tmp_path):
    """A worker killed while writing a part leaves its temporary file (empty, as SIGKILL during
    the write leaves it, and one of an older run's naming): it is hidden from Parquet readers
    while it waits, and publishing moves the parts only, so the output reads as one table."""
    run_folder = RunFolder(pyarrow.fs.LocalFileSystem(), str(tmp_path / "out"))
    Path(run_folder.parts).mkdir(parents=True)
    table = vectors_table()
    run_folder.write_part("part-000000-000000000.parquet", [table])
    (Path(run_folder.parts) / ".part-000000-000000001.parquet.0123456789abcdef.tmp").write_bytes(b"")
    (Path(run_folder.parts) / "part-000000-000000001.parquet.0123456789abcdef.tmp").write_bytes(b"")
    written = sorted(path.name for path in Path(run_folder.parts).iterdir())
    assert [name for name in written if not name.endswith(".tmp")] == ["part-000000-000000000.parquet"]
    run_folder.publish({"rows": table.num_rows, "tokens": 3 * table.num_rows}, force=False)
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["part-000000-000000000.parquet"]
    assert pq.read_table(tmp_path / "out").select(table.schema.names).equals(table)
    assert not Path(run_folder.path).exists()


def test_a_part_cut_off_before_its_move_is_hidden_from_readers(tmp_path, monkeypatch):
    """A writer stopped between writing a part and moving it into place leaves a file whose name
    Parquet readers skip: the parts folder still reads as the parts written whole."""
    run_folder = RunFolder(pyarrow.fs.LocalFileSystem(), str(tmp_path / "out"))
    Path(run_folder.parts).mkdir(parents=True)
    table = vectors_table()
    run_folder.write_part("part-000000-000000000.parquet", [table])

    close = pq.ParquetWriter.close

    def write_then_die(writer):
        close(writer)
        raise SystemExit("killed before the move")

    monkeypatch.setattr(pq.ParquetWriter, "close", write_then_die)
    with pytest.raises(SystemExit):
        run_folder.write_part("part-000000-000000001.parquet", [table])
    monkeypatch.undo()
    left = sorted(path.name for path in Path(run_folder.parts).iterdir())
    assert left[0].startswith(".part-000000-000000001.parquet.") and left[0].endswith(".tmp")
    assert left[1:] == ["part-000000-000000000.parquet"]
    assert pq.read_table(run_folder.parts).num_rows == table.num_rows
