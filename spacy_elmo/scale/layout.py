"""Where a run folder keeps its parts and manifests, and the completeness check of one input
file. It imports pyarrow and the standard library only: the Ray task that runs the check starts
in a fraction of a second, where a process importing the rest of the package (torch, spaCy)
takes seconds."""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

PARTS, MANIFESTS = "parts", "manifests"
PART_NAME = re.compile(r"^part-(\d{6})-(\d{9})\.parquet$")
PART_KEY = b"spacy_elmo_part"  # a part's schema metadata: its block, rows, ids digest, tokens


def part_path(run_path: str, file_index: int, block_index: int) -> str:
    return posixpath.join(run_path, PARTS, f"part-{file_index:06d}-{block_index:09d}.parquet")


def manifest_path(run_path: str, file_index: int) -> str:
    return posixpath.join(run_path, MANIFESTS, f"file-{file_index:06d}.json")


def read_json(filesystem: Any, path: str) -> Any:
    with filesystem.open_input_stream(path) as stream:
        return json.loads(stream.read().decode("utf8"))


def check_file(filesystem: Any, run_path: str, file_index: int) -> dict[str, Any]:
    """Check one input file's parts against its manifest (a Ray task per file runs this):
    {"rows", "tokens", "id_kind", "problems": [...]}, reading only the parts' footers."""
    import pyarrow.parquet

    manifest = read_json(filesystem, manifest_path(run_path, file_index))
    rows = tokens = 0
    problems = []
    for block_index, (n_rows, digest) in enumerate(manifest["blocks"]):
        path = part_path(run_path, file_index, block_index)
        try:
            metadata = pyarrow.parquet.read_schema(path, filesystem=filesystem).metadata or {}
        except (OSError, ValueError) as error:
            problems.append(f"{manifest['name']}, block {block_index}: no output part ({error})")
            continue
        part = json.loads(metadata.get(PART_KEY, b"{}"))
        if part.get("rows") != n_rows or part.get("ids") != digest:
            problems.append(
                f"{manifest['name']}, block {block_index}: the part holds {part.get('rows')} rows "
                f"for {n_rows} input rows, or other ids"
            )
            continue
        rows, tokens = rows + n_rows, tokens + part["tokens"]
    return {"rows": rows, "tokens": tokens, "id_kind": manifest["id_kind"], "problems": problems}
