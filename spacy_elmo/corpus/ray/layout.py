"""Where a run folder keeps its parts and manifests, and the completeness check of its input
files. It imports pyarrow and the standard library only: the Ray task that runs the check starts
in a fraction of a second, where a process importing the rest of the package (torch, spaCy)
takes seconds."""

from __future__ import annotations

import json
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

PARTS, MANIFESTS = "parts", "manifests"
# a part of an input file: part-FILE-PART; a batch of a Dataset: part-DIGEST of its ids
PART_NAME = re.compile(r"^part-(\d{6})-(\d{9})\.parquet$")
BATCH_PART_NAME = re.compile(r"^part-([0-9a-f]{24})\.parquet$")
BATCH_MANIFEST_NAME = re.compile(r"^batch-([0-9a-f]{24})\.json$")
PART_KEY = b"spacy_elmo_part"  # a part's footer metadata: its rows, ids digest, tokens
# requests to the output's filesystem at once, where a run lists, checks or moves its parts: an
# object store answers each in tens of milliseconds, and serves many at once
REQUESTS_IN_FLIGHT = 16


def is_part(name: str) -> bool:
    return bool(PART_NAME.match(name) or BATCH_PART_NAME.match(name))


def part_name(file_index: int, part_index: int) -> str:
    return f"part-{file_index:06d}-{part_index:09d}.parquet"


def batch_part_name(digest: str) -> str:
    return f"part-{digest}.parquet"


def part_path(run_path: str, file_index: int, part_index: int) -> str:
    return posixpath.join(run_path, PARTS, part_name(file_index, part_index))


def batch_manifest_path(run_path: str, digest: str) -> str:
    return posixpath.join(run_path, MANIFESTS, f"batch-{digest}.json")


def manifest_path(run_path: str, file_index: int) -> str:
    return posixpath.join(run_path, MANIFESTS, f"file-{file_index:06d}.json")


def read_json(filesystem: Any, path: str) -> Any:
    with filesystem.open_input_stream(path) as stream:
        return json.loads(stream.read().decode("utf8"))


@dataclass(frozen=True)
class MadeWith:
    """What decides a run's vectors (its model, layers and precision plan), as the provenance in
    each part's schema metadata records it under `key`: every part of the run must agree. A part
    that does not was written by a writer of an earlier run, one still running after its command
    was killed and the output started again with other settings."""

    key: bytes
    facts: dict[str, Any]

    def agrees(self, metadata: dict[bytes, bytes]) -> bool:
        recorded = json.loads(metadata.get(self.key, b"{}"))
        return all(recorded.get(name) == value for name, value in self.facts.items())


def part_metadata(filesystem: Any, path: str) -> dict[bytes, bytes]:
    """A part's key-value metadata (its footer's: the provenance and, added once the part was
    written whole, `PART_KEY`); OSError where it is missing or not a Parquet file."""
    import pyarrow.parquet

    try:
        return pyarrow.parquet.read_metadata(path, filesystem=filesystem).metadata or {}
    except ValueError as error:  # not a Parquet file
        raise OSError(str(error)) from None


def checked_part(
    filesystem: Any, path: str, where: str, n_rows: int, digest: str, made_with: MadeWith
) -> tuple[int, str | None]:
    """(tokens, None) where the part at `path` holds the `n_rows` rows of ids `digest`, made as
    the run makes them, else (0, the problem). A wrong part is deleted, so that a resumed run,
    which computes the parts that are missing, writes it again."""
    try:
        metadata = part_metadata(filesystem, path)
    except OSError as error:
        problem = f"no output part ({error})"
    else:
        part = json.loads(metadata.get(PART_KEY, b"{}"))
        if part.get("rows") != n_rows or part.get("ids") != digest:
            problem = f"the part holds {part.get('rows')} rows for {n_rows} input rows, or other ids"
        elif not made_with.agrees(metadata):
            problem = "the part was made with another model, layers or precision (by an earlier run's writer)"
        else:
            return part["tokens"], None
    if is_file(filesystem, path):
        filesystem.delete_file(path)
        problem += "; deleted"
    return 0, f"{where}: {problem}"


def is_file(filesystem: Any, path: str) -> bool:
    import pyarrow.fs

    return filesystem.get_file_info(path).type == pyarrow.fs.FileType.File


def check_files(
    filesystem: Any, run_path: str, file_indexes: list[int], made_with: MadeWith
) -> list[dict[str, Any]]:
    """Check input files' parts against their manifests and the run's settings (a Ray task runs
    this for a group of files): for each file {"rows", "tokens", "id_kind", "problems": [...]},
    reading only the parts' footers, `REQUESTS_IN_FLIGHT` at a time (an object store answers
    each in tens of milliseconds)."""
    manifests = {index: read_json(filesystem, manifest_path(run_path, index)) for index in file_indexes}
    checks = [
        (index, part_index, n_rows, digest)
        for index, manifest in manifests.items()
        for part_index, (n_rows, digest) in enumerate(manifest["parts"])
    ]

    def check(item: tuple[int, int, int, str]) -> tuple[int, str | None]:
        index, part_index, n_rows, digest = item
        where = f"{manifests[index]['name']}, part {part_index}"
        path = part_path(run_path, index, part_index)
        return checked_part(filesystem, path, where, n_rows, digest, made_with)

    with ThreadPoolExecutor(REQUESTS_IN_FLIGHT) as pool:
        outcomes = list(pool.map(check, checks))
    results = {
        index: {"rows": 0, "tokens": 0, "id_kind": manifest["id_kind"], "problems": []}
        for index, manifest in manifests.items()
    }
    for (index, _, n_rows, _), (n_tokens, problem) in zip(checks, outcomes):
        result = results[index]
        if problem:
            result["problems"].append(problem)
        else:
            result["rows"], result["tokens"] = result["rows"] + n_rows, result["tokens"] + n_tokens
    return [results[index] for index in file_indexes]


def check_batches(filesystem: Any, run_path: str, batches: int, made_with: MadeWith) -> dict[str, Any]:
    """Check a Dataset run (a Ray task runs this): every batch manifest has its part, with its
    rows; no part without a manifest; and `batches` (the batches the writers were handed)
    manifests, fewer meaning that batches of the same ids in the same order were merged.
    {"rows", "tokens", "problems": [...]}, reading only manifests and the parts' footers."""
    import pyarrow.fs

    def names(folder: str, pattern: re.Pattern[str]) -> set[str]:
        selector = pyarrow.fs.FileSelector(posixpath.join(run_path, folder), allow_not_found=True)
        infos = filesystem.get_file_info(selector)
        return {match.group(1) for info in infos if (match := pattern.match(info.base_name))}

    manifests, parts = names(MANIFESTS, BATCH_MANIFEST_NAME), names(PARTS, BATCH_PART_NAME)
    rows = tokens = 0
    problems = [f"batch {digest}: a part without a manifest" for digest in sorted(parts - manifests)]

    def check(digest: str) -> tuple[int, int, str | None]:
        n_rows = read_json(filesystem, batch_manifest_path(run_path, digest))["rows"]
        path = posixpath.join(run_path, PARTS, batch_part_name(digest))
        return (n_rows, *checked_part(filesystem, path, f"batch {digest}", n_rows, digest, made_with))

    with ThreadPoolExecutor(REQUESTS_IN_FLIGHT) as pool:
        outcomes = list(pool.map(check, sorted(manifests)))
    for n_rows, n_tokens, problem in outcomes:
        if problem:
            problems.append(problem)
        else:
            rows, tokens = rows + n_rows, tokens + n_tokens
    if len(manifests) != batches:
        problems.append(
            f"the writers were handed {batches:,} batches, of which {len(manifests):,} are distinct: the "
            "Dataset repeats a batch of ids (give every row its own id), or it read other rows on a retry"
        )
    return {"rows": rows, "tokens": tokens, "problems": problems}
