"""The folder of one run, beside its output: what the run is (`run.json`: its settings, precision
plan and how it cuts its input), the output parts written so far (`parts/`, each the rows of a
stretch of one input file, written whole or not at all), and one manifest per input file
(`manifests/`: its parts' row counts and id digests, written by the task that read it).

It is the run's claim on its output (made with an exclusive create, held with a lock while the
command runs), what `--resume` continues, and what the completeness check reads: every part of
every manifest must be written, with the same rows, before the parts become the output.

On a local disk the parts become the output with one rename. Elsewhere (an object store) they
are moved, many at a time, after `publishing.json` records that the moves began and the run's row and
token counts: a run that dies among the moves is finished by `--resume`, which moves the rest
and computes nothing.

    OUTPUT_PARENT/.OUTPUT_NAME.spacy-elmo-run/
        run.json
        parts/part-000003-000000017.parquet     file 3, part 17 of the input
        manifests/file-000003.json
        publishing.json                         (not on a local disk) the moves into OUTPUT began
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...bilm.errors import ElmoError
from . import layout
from .layout import MANIFESTS, PART_NAME, PARTS, REQUESTS_IN_FLIGHT, is_file, is_part

RUN_FILE, LOCK_FILE, PUBLISHING_FILE = "run.json", "claim.lock", "publishing.json"


class RunFolderError(ElmoError, RuntimeError):
    """An output is claimed by another run, an unfinished run is in the way, or a run is incomplete."""


def ids_digest(ids: list[Any]) -> str:
    """A short digest of a part's ids, in order: a part holds the rows meant for it iff they agree."""
    return hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode("utf8")).hexdigest()[:24]


@dataclass(frozen=True)
class RunFolder:
    """The run folder of `output` on `filesystem` (a `pyarrow.fs.FileSystem`); both are paths on it."""

    filesystem: Any
    output: str

    @property
    def path(self) -> str:
        parent, name = posixpath.split(self.output.rstrip("/"))
        return posixpath.join(parent, f".{name}.spacy-elmo-run")

    @property
    def parts(self) -> str:
        return posixpath.join(self.path, PARTS)

    def manifest_path(self, file_index: int) -> str:
        return layout.manifest_path(self.path, file_index)

    @property
    def is_local(self) -> bool:
        import pyarrow.fs

        return isinstance(self.filesystem, pyarrow.fs.LocalFileSystem)

    @contextmanager
    def claim(self, *, resume: bool, force: bool, resumable: bool = True) -> Iterator[None]:
        """Hold the output for this run: on a local disk with a lock that the system releases when
        the process ends, however it ends (a second run is refused while this one lives); on other
        filesystems by the run folder's existence alone. An unfinished run's folder is continued
        with `resume`, discarded with `force`, else refused (`resumable`: whether this run's input
        could continue it, which the refusal says; a run that cannot be continued leaves nothing
        when it fails, unless it failed among its moves into the output)."""
        from filelock import FileLock, Timeout

        existed = self.exists()
        self.filesystem.create_dir(self.path, recursive=True)
        lock = FileLock(posixpath.join(self.path, LOCK_FILE)) if self.is_local else None
        try:
            if lock is not None:
                lock.acquire(timeout=0)
        except Timeout:
            raise RunFolderError(
                f"Another spacy-elmo run is writing {self.output} now (it holds {self.path}): wait for it "
                "to end, or write to another path."
            ) from None
        try:
            publishing = self.publishing() is not None
            unfinished = existed and self.started() and (self.count_parts() > 0 or publishing)
            if unfinished and not resume and not force:
                how = (
                    "pass --resume to continue it, or --force to discard it and start again"
                    if resumable
                    else "a Dataset's run cannot continue it: pass force=True to discard it and start again"
                )
                state = "parts left to move into it" if publishing else "parts written"
                raise RunFolderError(
                    f"{self.output} has an unfinished run ({self.path}, {self.count_parts():,} {state}): "
                    f"{how}."
                )
            if (existed and not unfinished) or (force and not resume):
                for name in (PARTS, MANIFESTS, RUN_FILE, PUBLISHING_FILE):
                    self.delete(posixpath.join(self.path, name))
            yield
        except BaseException:
            # failed before its first part, or a run that nothing could continue: nothing worth
            # keeping; but a run that died among its moves into the output keeps its record of them
            moving = self.publishing() is not None
            if not moving and (not resumable or not self.count_parts()):
                self.delete(self.path)
            raise
        finally:
            if lock is not None:
                lock.release()

    def kept(self, error: Exception, *, resumable: bool) -> Exception:
        """`error`, saying that the parts written so far wait in the run folder (of a run that
        can be resumed: `claim` removes any other)."""
        if isinstance(error, ElmoError) and resumable and self.count_parts():
            error.args = (
                f"{error.args[0]} The {self.count_parts():,} parts written so far are kept: once the cause "
                "is fixed, run the same command with --resume to go on from them, or --force to start over.",
            )
        return error

    def started(self) -> bool:
        return is_file(self.filesystem, posixpath.join(self.path, RUN_FILE))

    def delete(self, path: str) -> None:
        import pyarrow.fs

        kind = self.filesystem.get_file_info(path).type
        if kind == pyarrow.fs.FileType.Directory:
            self.filesystem.delete_dir(path)
        elif kind == pyarrow.fs.FileType.File:
            self.filesystem.delete_file(path)

    def start(
        self, settings: dict[str, Any], *, resume: bool, measure: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """Record a new run's settings and what it decides at its start (`measure`d now: its
        precision plan, how it cuts its input), or check that a resumed run is the same job;
        returns the run's record, whose decisions every part of the output follows."""
        run_file = posixpath.join(self.path, RUN_FILE)
        if resume and self.started():
            recorded = self.read_json(run_file)
            if self.publishing() is not None and recorded["input"]["files"] != settings["input"]["files"]:
                raise RunFolderError(
                    f"--resume: the unfinished run into {self.output} was moving its parts into place, and "
                    "its input has changed since: pass --force to start again."
                )
            if recorded.get("format") != settings.get("format"):
                raise RunFolderError(
                    f"--resume: the unfinished run into {self.output} was started by another version of "
                    f"spacy-elmo (run format {recorded.get('format')!r}, this one writes "
                    f"{settings.get('format')!r}), which cuts its output otherwise: pass --force to start "
                    "again."
                )
            self.forget_changed_files(recorded["input"]["files"], settings["input"]["files"])
            recorded["input"]["files"] = settings["input"]["files"]
            for name, value in settings.items():
                if recorded.get(name) != value:
                    raise RunFolderError(
                        f"--resume: the unfinished run into {self.output} has another {name} "
                        f"({json.dumps(recorded.get(name))[:200]}; this command: {json.dumps(value)[:200]}). "
                        "Resume it with the same input, model and options, or pass --force to start again."
                    )
            self.write_json(run_file, recorded)
            return recorded
        recorded = {**settings, **measure()}
        for name in (PARTS, MANIFESTS):
            self.filesystem.create_dir(posixpath.join(self.path, name), recursive=True)
        self.write_json(run_file, recorded)
        return recorded

    def forget_changed_files(self, recorded: list[dict[str, Any]], current: list[dict[str, Any]]) -> None:
        """Drop the parts of input files that changed since the run began (fixed, replaced, or
        now at another position): a resumed run computes them again."""
        unchanged = {index for index, (old, new) in enumerate(zip(recorded, current)) if old == new}
        for info in self.part_files():
            match = PART_NAME.match(info.base_name)
            if match and int(match.group(1)) not in unchanged:
                self.filesystem.delete_file(info.path)

    def publish(self, counts: dict[str, int], *, force: bool) -> None:
        """Move the parts into place as the output (replacing it with `force`), then drop the run
        folder. The temporary files that killed writers left are deleted first: the output holds
        parts only. On a local disk the move is one rename; elsewhere one move per part, after
        `counts` (the run's rows and tokens) are recorded as the publishing record, and a run that
        died among the moves (`publishing()` is its record) moves the rest."""
        self.drop_temporaries()
        continuing = self.publishing() is not None
        if not continuing:
            self.make_room(force=force)
        if self.is_local:
            os.replace(self.parts, self.output)
        else:
            if not continuing:
                self.write_json(posixpath.join(self.path, PUBLISHING_FILE), counts)
            self.move_parts()
        self.delete(self.path)

    def make_room(self, *, force: bool) -> None:
        """Delete what is at the output path (with `force`, or an empty folder)."""
        import pyarrow.fs

        info = self.filesystem.get_file_info(self.output)
        if info.type != pyarrow.fs.FileType.NotFound:
            if not force and self.filesystem.get_file_info(pyarrow.fs.FileSelector(self.output)):
                raise RunFolderError(
                    f"{self.output} was written by someone else during this run; the run's output stays in "
                    f"{self.parts}. Move it yourself, or run again with --resume --force to replace "
                    f"{self.output}."
                )
            self.delete(self.output)

    def move_parts(self) -> None:
        """One move per part into the output folder (a filesystem without a folder rename),
        `REQUESTS_IN_FLIGHT` at a time; after a failed move no other starts."""
        self.filesystem.create_dir(self.output, recursive=True)
        parts = self.part_files()
        failed = threading.Event()

        def move(part: Any) -> bool:
            if failed.is_set():
                return False
            try:
                self.filesystem.move(part.path, posixpath.join(self.output, part.base_name))
            except OSError:
                failed.set()
                raise
            return True

        with ThreadPoolExecutor(REQUESTS_IN_FLIGHT) as pool:
            moves = [pool.submit(move, part) for part in parts]
        errors = [future.exception() for future in moves if future.exception() is not None]
        if errors:
            moved = sum(1 for future in moves if future.exception() is None and future.result())
            raise RunFolderError(
                f"Moving the parts into {self.output} failed after {moved:,} of {len(parts):,} "
                f"({errors[0]}). The output is incomplete until the rest are moved: run the same command "
                "with --resume, which moves them and computes nothing (a Dataset's run: again with "
                "force=True)."
            )

    def publishing(self) -> dict[str, int] | None:
        """The publishing record (the run's rows and tokens) of a run whose parts were being moved
        into the output one by one, else None."""
        path = posixpath.join(self.path, PUBLISHING_FILE)
        return self.read_json(path) if is_file(self.filesystem, path) else None

    def drop_temporaries(self) -> None:
        """Delete the temporary files that writers killed mid-write left in the parts folder."""
        import pyarrow.fs

        selector = pyarrow.fs.FileSelector(self.parts, allow_not_found=True)
        for info in self.filesystem.get_file_info(selector):
            if info.type == pyarrow.fs.FileType.File and info.base_name.endswith(".tmp"):
                self.filesystem.delete_file(info.path)

    def exists(self) -> bool:
        import pyarrow.fs

        return self.filesystem.get_file_info(self.path).type != pyarrow.fs.FileType.NotFound

    def read_json(self, path: str) -> Any:
        return layout.read_json(self.filesystem, path)

    def write_json(self, path: str, document: Any) -> None:
        """Whole or not at all: written under a temporary name, then moved into place."""
        temporary = temporary_path(path)
        with self.filesystem.open_output_stream(temporary) as stream:
            stream.write(json.dumps(document, indent=1).encode("utf8"))
        self.filesystem.move(temporary, path)

    def done_parts(self) -> dict[int, frozenset[int]]:
        """The parts of input files written so far, by file index (a resumed run skips them):
        one listing of the parts folder for the whole run."""
        done: dict[int, set[int]] = {}
        for match in (PART_NAME.match(info.base_name) for info in self.part_files()):
            if match:
                done.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
        return {index: frozenset(parts) for index, parts in done.items()}

    def count_parts(self) -> int:
        return len(self.part_files())

    def part_files(self) -> list[Any]:
        """The `pyarrow.fs.FileInfo` of every part written so far (none before the first)."""
        import pyarrow.fs

        selector = pyarrow.fs.FileSelector(self.parts, allow_not_found=True)
        return [info for info in self.filesystem.get_file_info(selector) if is_part(info.base_name)]

    def write_part(
        self,
        name: str,
        tables: Iterable[Any],
        *,
        metadata: dict[bytes, bytes] | None = None,
        footer: Callable[[], dict[bytes, bytes]] | None = None,
    ) -> None:
        """An output part `name` of `tables` (one row group each; `metadata` in its schema, and
        `footer()`, asked once every table is written, added to its footer), written under a
        hidden temporary name and moved into place whole: a worker killed while writing leaves a
        temporary file, never a part (`publish` deletes it)."""
        import pyarrow.parquet

        from ..parquet import write_options

        final = posixpath.join(self.parts, name)
        temporary = temporary_path(final)
        writer = None
        try:
            for table in tables:
                if writer is None:
                    schema = table.schema.with_metadata({**(table.schema.metadata or {}), **(metadata or {})})
                    options = write_options(schema)
                    writer = pyarrow.parquet.ParquetWriter(
                        temporary, schema, filesystem=self.filesystem, **options
                    )
                writer.write_table(table.cast(writer.schema) if table.schema != writer.schema else table)
            if writer is not None and footer is not None:
                writer.add_key_value_metadata(footer())
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise ValueError(f"The part {name} has no rows: a part holds one or more.")
        self.filesystem.move(temporary, final)


def temporary_path(path: str) -> str:
    """A unique hidden name beside `path` (`.NAME.RANDOM.tmp`): Parquet readers skip names that
    start with a dot, so a temporary file left by a killed writer is never read as data."""
    folder, name = posixpath.split(path)
    return posixpath.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
