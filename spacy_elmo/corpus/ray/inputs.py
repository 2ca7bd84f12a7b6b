"""The two inputs of a corpus run: files that the run reads itself (`FileInput`: a path, folder,
glob or URI), or a `ray.data.Dataset` the caller built (`DatasetInput`). Each turns itself into
a Ray Dataset of blocks for the writers (`blocks.BLOCK_SCHEMA`: one row per block of rows) and
checks, once they are written, that every input row is in the parts exactly once.

Only files can be resumed: their parts are cut the same way in every run (`cutting.py`), so the
parts already written are known. A Dataset's batches follow its blocks, which Ray may cut
differently in the next run; its parts are named by the digest of their ids instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...bilm.errors import ConfigError, InputError
from ..outputs import check_corpus_output
from ..sources import Corpus, CorpusFile, kind_of
from .cutting import PartCut
from .layout import MadeWith, check_batches, check_files
from .run_folder import RunFolder, RunFolderError

# Ray tasks that check a run's files (each with several requests in flight): a task per file would
# start thousands of processes for a folder of thousands of files
CHECK_TASKS = 8


def raise_problems(problems: list[str], remedy: str) -> None:
    if problems:
        raise RunFolderError(
            f"The run wrote {len(problems)} part{'s' if len(problems) != 1 else ''} of the input wrongly "
            f"or not at all ({'; '.join(problems[:3])}); nothing was moved to the output. {remedy}"
        )


@dataclass(frozen=True)
class FileInput:
    """Files of one kind, read and checked by Ray's read tasks, one task per file."""

    corpus: Corpus
    resumable = True

    @property
    def description(self) -> str:
        return f"{len(self.corpus.files)} file{'s' if len(self.corpus.files) != 1 else ''}"

    @property
    def total_bytes(self) -> int | None:
        return self.corpus.total_bytes

    def settings(self) -> dict[str, Any]:
        """What a resumed run compares: where the input is, however it is spelled, and its files."""
        return {"location": self.corpus.normalized_location(), "files": self.corpus.fingerprint()}

    def workers(self, given: int | None, cpus: int) -> int:
        """One per CPU by default: the read tasks take none."""
        return given or max(1, cpus)

    def check_output(self, filesystem: Any, output: str, *, force: bool) -> None:
        check_corpus_output(filesystem, output, self.corpus, force=force)

    def blocks(
        self, ray: Any, run_folder: RunFolder, cut: PartCut, done: dict[int, frozenset[int]], workers: int
    ) -> Any:
        """Read tasks (no CPU of their own, so that they never wait behind the writers), one per
        file, each part's rows one row; the parts in `done` are skipped."""
        from .blocks import ReadFiles

        files = ray.data.from_items(
            [{"file": index} for index in range(len(self.corpus.files))],
            override_num_blocks=len(self.corpus.files),
        )
        return files.map_batches(
            ReadFiles(self.corpus, run_folder, cut, done),
            batch_size=1,
            batch_format="pyarrow",
            num_cpus=0,
            concurrency=min(workers, len(self.corpus.files)),
        )

    def check(self, ray: Any, run_folder: RunFolder, batches: int, made_with: MadeWith) -> tuple[int, int]:
        """Every part of every input file is written, with its rows, made as this run makes them:
        Ray tasks in processes that import no torch, each reading a group of files' manifests and
        their parts' footers with several requests in flight (a wrong part is deleted); returns
        (rows, tokens)."""
        check = ray.remote(num_cpus=0)(check_files)
        paths = (run_folder.filesystem, run_folder.path)
        indexes = list(range(len(self.corpus.files)))
        step = max(1, -(-len(indexes) // CHECK_TASKS))
        groups = [indexes[start : start + step] for start in range(0, len(indexes), step)]
        results = [
            result
            for group in ray.get([check.remote(*paths, group, made_with) for group in groups])
            for result in group
        ]
        problems = [problem for result in results for problem in result["problems"]]
        raise_problems(
            problems, "Run the command again with --resume: it computes only the parts that are missing."
        )
        files = self.corpus.files
        kinds = {result["id_kind"]: file for result, file in zip(results, files) if result["id_kind"]}
        if len(kinds) > 1:
            examples = ", ".join(f"{file.name} has {kind} ids" for kind, file in kinds.items())
            raise InputError(
                f"The input's ids are of mixed types ({examples}): give every row an id of one type."
            )
        rows = sum(result["rows"] for result in results)
        if rows == 0:
            raise InputError(f"Input {self.corpus.location} has no rows: there is nothing to embed.")
        return rows, sum(result["tokens"] for result in results)


@dataclass(frozen=True)
class DatasetInput:
    """A `ray.data.Dataset` with an `id` column (integers or strings) and `text` or `tokens`;
    its other columns pass through. Batches of `batch_size` rows are cut by a light task
    before the writers, which records each batch's manifest."""

    dataset: Any
    resumable = False

    description = "a Dataset"
    total_bytes = None

    def settings(self) -> dict[str, Any]:
        return {"dataset": True}

    def workers(self, given: int | None, cpus: int) -> int:
        """A CPU is left to the Dataset's own tasks (Ray Data's reads take one each): writers on
        every CPU would wait for rows that no read task could be scheduled to produce."""
        if cpus < 2:
            raise ConfigError(
                f"The cluster has {cpus} CPU: a Dataset's own read tasks need one beside the workers' (one "
                "CPU each). Run on 2 CPUs or more, or give the Dataset's files as the source."
            )
        if given is not None and given >= cpus:
            raise ConfigError(
                f"workers={given}: the cluster has {cpus} CPUs, and a Dataset's own read tasks need one "
                f"beside the workers (one CPU each), or the run would wait forever: give workers={cpus - 1} "
                "or fewer."
            )
        return given or cpus - 1

    def check_output(self, filesystem: Any, output: str, *, force: bool) -> None:
        """The rules of a path's output, over the files the Dataset reads (`input_files()`): a
        Dataset read from the output folder is never deleted by its own run, even with force."""
        check_corpus_output(filesystem, output, self.read_files(filesystem), force=force)

    def read_files(self, filesystem: Any) -> Corpus:
        """The files the Dataset reads as a corpus on the output's `filesystem` (Ray gives their
        paths without a scheme; a Dataset built from rows reads none)."""
        paths = sorted(self.dataset.input_files())
        files = tuple(CorpusFile(filesystem, path, path, None, kind_of(path)) for path in paths)
        return Corpus("the Dataset", files)

    def blocks(
        self, ray: Any, run_folder: RunFolder, cut: PartCut, done: dict[int, frozenset[int]], workers: int
    ) -> Any:
        """A light task cuts the Dataset into parts of `cut.rows_for_dataset()` rows (nothing is
        ever done: a Dataset's run is not resumed)."""
        from .blocks import DatasetBatches

        return self.dataset.map_batches(
            DatasetBatches(run_folder),
            batch_size=cut.rows_for_dataset(),
            batch_format="pyarrow",
            num_cpus=0,
            concurrency=workers,
        )

    def check(self, ray: Any, run_folder: RunFolder, batches: int, made_with: MadeWith) -> tuple[int, int]:
        """Every batch has its part, with its rows, made as this run makes them, and no two
        batches were merged (one Ray task that reads the manifests and the parts' footers);
        returns (rows, tokens)."""
        check = ray.remote(num_cpus=0)(check_batches)
        result = ray.get(check.remote(run_folder.filesystem, run_folder.path, batches, made_with))
        raise_problems(result["problems"], "Run it again with force=True.")
        if result["rows"] == 0:
            raise InputError("The Dataset has no rows: there is nothing to embed.")
        return result["rows"], result["tokens"]


CorpusInput = FileInput | DatasetInput
