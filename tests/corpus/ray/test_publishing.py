"""Publishing a run's parts where a folder cannot be renamed (an object store): one move per part
after a publishing record; a run that dies among the moves keeps the rest, is refused without
--resume, and with it moves the rest and computes nothing. On the local disk, through a
filesystem whose folder renames are not used (pyarrow's `SubTreeFileSystem`, which is not a
`LocalFileSystem`) and one whose moves fail after a few."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet as pq
import pytest

from spacy_elmo.corpus.ray.run_folder import RunFolder, RunFolderError

fsspec = pytest.importorskip("fsspec", reason="a filesystem whose moves fail is built on fsspec's")

SETTINGS = {"input": {"files": [{"path": "corpus.txt", "size": 10}]}, "model": "tiny"}
COUNTS = {"rows": 4, "tokens": 8}
PARTS = [f"part-000000-{block:09d}.parquet" for block in range(4)]


class MovesFailAfter(pyarrow.fs.FSSpecHandler):
    """The local disk, where moves into `folder` fail once `moves` of them have been made (a lost
    connection)."""

    def __init__(self, folder: Path, moves: int) -> None:
        super().__init__(fsspec.filesystem("file"))
        self.folder, self.moves = f"{folder}/", moves

    def move(self, source: str, destination: str) -> None:
        if destination.startswith(self.folder):
            if self.moves == 0:
                raise OSError("connection reset by peer")
            self.moves -= 1
        super().move(source, destination)


def object_store(root: Path) -> pyarrow.fs.FileSystem:
    return pyarrow.fs.SubTreeFileSystem(str(root), pyarrow.fs.LocalFileSystem())


def written_run(root: Path, *, resumable: bool = True) -> RunFolder:
    """A run into `out` whose four parts are written, not yet published."""
    run_folder = RunFolder(object_store(root), "out")
    with run_folder.claim(resume=False, force=False, resumable=resumable):
        run_folder.start(SETTINGS, resume=False, measure=lambda: {"plan": "fp32"})
        for block, name in enumerate(PARTS):
            run_folder.write_part(name, [pa.table({"id": [block], "tokens": [["a", "b"]]})])
    return run_folder


def identities(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_ino for path in folder.iterdir()}


def failing_publish(root: Path, run_folder: RunFolder, moves: int, *, resumable: bool = True) -> None:
    failing = RunFolder(pyarrow.fs.PyFileSystem(MovesFailAfter(root / "out", moves)), str(root / "out"))
    with pytest.raises(RunFolderError) as raised:
        with failing.claim(resume=True, force=False, resumable=resumable):
            failing.start(SETTINGS, resume=True, measure=lambda: {"plan": "never measured"})
            failing.publish(COUNTS, force=False)
    assert f"failed after {moves} of 4 (connection reset by peer)" in str(raised.value)
    assert "run the same command with --resume, which moves them and computes nothing" in str(raised.value)


def test_parts_are_moved_into_the_output_and_the_run_folder_goes(tmp_path):
    run_folder = written_run(tmp_path)
    (Path(tmp_path / run_folder.parts) / ".part-000000-000000004.parquet.0123.tmp").write_bytes(b"")
    written = identities(tmp_path / run_folder.parts)
    with run_folder.claim(resume=True, force=False):
        run_folder.start(SETTINGS, resume=True, measure=lambda: {"plan": "never measured"})
        run_folder.publish(COUNTS, force=False)
    assert identities(tmp_path / "out") == {name: written[name] for name in PARTS}
    assert pq.read_table(tmp_path / "out").num_rows == 4 and not (tmp_path / run_folder.path).exists()


def test_a_run_that_died_among_its_moves_is_finished_by_resume_without_computing(tmp_path):
    run_folder = written_run(tmp_path)
    written = identities(tmp_path / run_folder.parts)
    failing_publish(tmp_path, run_folder, moves=2)
    moved = sorted(identities(tmp_path / "out"))  # incomplete, and said so (moves run 16 at a time:
    assert len(moved) == 2 and set(moved) <= set(PARTS)  # any two may be the first to land)
    assert run_folder.publishing() == COUNTS and run_folder.count_parts() == 2

    with pytest.raises(
        RunFolderError, match=r"an unfinished run \(\.out\.spacy-elmo-run, 2 parts left to move"
    ):
        with run_folder.claim(resume=False, force=False):
            pass
    with run_folder.claim(resume=True, force=False):
        run_folder.start(SETTINGS, resume=True, measure=lambda: {"plan": "never measured"})
        assert run_folder.publishing() == COUNTS  # what the engine reports, instead of computing
        run_folder.publish(COUNTS, force=False)
    assert identities(tmp_path / "out") == written  # moved, none written again
    assert not (tmp_path / run_folder.path).exists()


def test_a_resume_whose_input_changed_after_the_moves_began_is_refused(tmp_path):
    run_folder = written_run(tmp_path)
    failing_publish(tmp_path, run_folder, moves=1)
    changed = {**SETTINGS, "input": {"files": [{"path": "corpus.txt", "size": 11}]}}
    with pytest.raises(RunFolderError, match="was moving its parts into place, and its input has changed"):
        with run_folder.claim(resume=True, force=False):
            run_folder.start(changed, resume=True, measure=lambda: {"plan": "never measured"})
    assert run_folder.publishing() == COUNTS  # the refusal keeps the run


def test_force_discards_a_run_that_died_among_its_moves(tmp_path):
    run_folder = written_run(tmp_path)
    failing_publish(tmp_path, run_folder, moves=3)
    with run_folder.claim(resume=False, force=True):
        assert run_folder.publishing() is None and run_folder.count_parts() == 0
        run_folder.start(SETTINGS, resume=False, measure=lambda: {"plan": "fp32"})
        run_folder.write_part(PARTS[0], [pa.table({"id": [9], "tokens": [["c"]]})])
        run_folder.publish({"rows": 1, "tokens": 1}, force=True)
    assert sorted(identities(tmp_path / "out")) == PARTS[:1]
    assert pq.read_table(tmp_path / "out").column("id").to_pylist() == [9]


def test_a_datasets_run_that_died_among_its_moves_keeps_the_rest(tmp_path):
    """A run that cannot be resumed drops its folder when it fails, but not the parts that its
    output still lacks: the next run is told, and force=True starts again."""
    run_folder = written_run(tmp_path, resumable=False)
    failing_publish(tmp_path, run_folder, moves=2, resumable=False)
    assert run_folder.count_parts() == 2
    with pytest.raises(RunFolderError, match="a Dataset's run cannot continue it: pass force=True"):
        with run_folder.claim(resume=False, force=False, resumable=False):
            pass


def test_a_run_that_died_after_its_last_move_is_finished_by_resume(tmp_path):
    """Every part moved, the run folder not yet deleted: the output is the run's, not someone
    else's; --resume deletes the folder."""
    run_folder = written_run(tmp_path)
    failing_publish(tmp_path, run_folder, moves=2)
    for part in (tmp_path / run_folder.parts).glob("part-*"):  # as if it had died after its last move
        part.rename(tmp_path / "out" / part.name)
    with pytest.raises(RunFolderError, match=r"\(\.out\.spacy-elmo-run, 0 parts left to move into it\)"):
        with run_folder.claim(resume=False, force=False):
            pass
    with run_folder.claim(resume=True, force=False):
        run_folder.start(SETTINGS, resume=True, measure=lambda: {"plan": "never measured"})
        run_folder.publish(run_folder.publishing(), force=False)
    assert sorted(identities(tmp_path / "out")) == PARTS and not (tmp_path / run_folder.path).exists()


@pytest.mark.slow  # a Ray run on the test cluster: about 20 s
def test_a_ray_run_whose_moves_failed_resumes_by_moving_the_rest(
    ray_cluster, bilm_path, tmp_path, monkeypatch
):
    """The whole engine on an object store's terms (the output on a `SubTreeFileSystem`): the
    connection is lost after two moves into the output; the error says so and names --resume;
    the resumed run reports every row and moves the other parts, writing none again."""
    from spacy_elmo.corpus import run_corpus
    from spacy_elmo.corpus.ray import engine

    from .test_scale import corpus_file

    corpus = corpus_file(tmp_path, rows=20)
    monkeypatch.setattr(engine, "filesystem_of", lambda uri: (object_store(tmp_path), "out"))
    move_parts = RunFolder.move_parts

    def connection_lost(
        run_folder: RunFolder,
    ) -> None:  # the driver's moves only: workers never move into out
        output = tmp_path / run_folder.output
        move_parts(RunFolder(pyarrow.fs.PyFileSystem(MovesFailAfter(output, 2)), str(output)))

    monkeypatch.setattr(RunFolder, "move_parts", connection_lost)
    job = {"model": bilm_path, "rows_per_file": 2, "workers": 2, "progress_file": io.StringIO()}
    with pytest.raises(RunFolderError, match="failed after 2 of 10 .* with --resume, which moves them"):
        run_corpus(corpus, "out", **job, engine="ray")
    parts = tmp_path / ".out.spacy-elmo-run" / "parts"
    written = {**identities(tmp_path / "out"), **identities(parts)}
    assert len(identities(tmp_path / "out")) == 2 and len(written) == 10

    monkeypatch.setattr(RunFolder, "move_parts", move_parts)
    summary = run_corpus(corpus, "out", resume=True, **job, engine="ray")
    assert summary.rows == 20 and identities(tmp_path / "out") == written
    assert sorted(pq.read_table(tmp_path / "out").column("id").to_pylist()) == list(range(1, 21))


def test_a_run_of_another_run_format_is_not_resumed(tmp_path):
    """A run started by 0.1.0 (format "spacy-elmo-run": a part per batch) cannot be continued by
    a version that cuts parts by size: --resume says so, and --force starts again."""
    run_folder = written_run(tmp_path)
    old = {**SETTINGS, "format": "spacy-elmo-run"}
    (tmp_path / run_folder.path / "run.json").write_text(json.dumps({**old, "plan": "fp32"}), encoding="utf8")
    with pytest.raises(RunFolderError, match="started by another version of spacy-elmo .* pass --force"):
        with run_folder.claim(resume=True, force=False):
            run_folder.start({**SETTINGS, "format": "spacy-elmo-run/2"}, resume=True, measure=dict)
    assert run_folder.count_parts() == 4  # kept: --force is the user's call
