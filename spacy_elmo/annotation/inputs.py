"""Corpus files: a text file (one row per line, its id the line number), JSONL (one object per
line with `id` and `text` or `tokens`), or Parquet (a file or a folder of files, same columns).

Text and JSONL are read and checked here, row by row, so a bad line is named by its line number
before any model loads; Parquet is read by pyarrow (by the driver, with the Ray engine too) and
its rows are checked where they are embedded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..bilm.errors import InputError
from .rows import checked_text, checked_tokens

TEXT, JSONL, PARQUET = "text", "jsonl", "parquet"


def input_kind(path: Path) -> str:
    """Parquet for a folder or a `.parquet` file, JSONL for `.jsonl`/`.json`, else text."""
    if path.is_dir() or path.suffix == ".parquet":
        return PARQUET
    if path.suffix in (".jsonl", ".json"):
        return JSONL
    return TEXT


def check_input(path: Path) -> str:
    """The kind of an existing, non-empty input."""
    if not path.exists():
        raise InputError(f"Input {path} does not exist.")
    kind = input_kind(path)
    if count_rows(path, kind) == 0:
        raise InputError(f"Input {path} has no rows: there is nothing to embed.")
    return kind


def read_rows(path: Path, kind: str) -> Iterator[dict[str, Any]]:
    """The rows of a text or JSONL file, checked; a text row is {"id": line number, "text": line}."""
    try:
        with path.open(encoding="utf-8-sig") as lines:
            for number, line in enumerate(lines, start=1):
                line = line.rstrip("\r\n")
                yield {"id": number, "text": line} if kind == TEXT else json_row(path, number, line)
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start}).") from None


def json_row(path: Path, number: int, line: str) -> dict[str, Any]:
    where = f"{path}, line {number}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"{where} is not JSON ({error.msg}): give one JSON object per line.") from None
    if not isinstance(row, dict) or "id" not in row:
        raise InputError(f'{where} is not an object with an "id": write {{"id": ..., "text": ...}}.')
    if "tokens" in row:
        checked_tokens(row["id"], row["tokens"])
    elif "text" in row:
        checked_text(row["id"], row["text"])
    else:
        raise InputError(f'{where} (row id {row["id"]!r}) has neither "text" nor "tokens".')
    return row


def count_rows(path: Path, kind: str) -> int:
    """Rows in the input: text and JSONL lines are read (and checked) once, Parquet from its metadata."""
    if kind == PARQUET:
        return parquet_dataset(path).count_rows()
    return sum(1 for _ in read_rows(path, kind))


def parquet_dataset(path: Path) -> Any:
    """A `pyarrow.dataset.Dataset` over a Parquet file or folder."""
    try:
        import pyarrow.dataset
    except ImportError:
        raise InputError(f'Reading Parquet ({path}) needs pyarrow: pip install "spacy-elmo[ray]".') from None
    dataset = pyarrow.dataset.dataset(path, format="parquet")
    if "id" not in dataset.schema.names:
        raise InputError(f'{path} has no "id" column (it has: {", ".join(dataset.schema.names)}).')
    return dataset


def read_batches(path: Path, kind: str, batch_size: int) -> Iterator[dict[str, list[Any]]]:
    """The input in batches of columns ({"id": [...], "text": [...], ...}); a JSONL key missing
    from some rows is None there."""
    if kind == PARQUET:
        for batch in parquet_dataset(path).to_batches(batch_size=batch_size):
            if batch.num_rows:
                yield batch.to_pydict()
        return
    rows: list[dict[str, Any]] = []
    for row in read_rows(path, kind):
        rows.append(row)
        if len(rows) == batch_size:
            yield as_columns(rows)
            rows = []
    if rows:
        yield as_columns(rows)


def as_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: [row.get(name) for row in rows] for name in names}
