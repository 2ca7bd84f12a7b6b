"""Read one corpus file as blocks of rows (pyarrow tables), checked as they are read: the same
code reads for the local engine and inside Ray's read tasks, so both see the same rows.

The rules, for every command and engine:
- text: one row per line, blank lines included (an empty row); its id is the line number from 1,
  or `NAME:LINE` when the input has several files. A UTF-8 byte-order mark is dropped.
- JSON lines: one object per line with an `id` (an integer or a string, one type in a file) and
  `text` (a string) or `tokens` (a list of strings); other keys pass through to the output;
  blank lines hold no row.
- Parquet: the same columns, an id in every row; its rows are checked where they are embedded.
A bad row stops the run with the file, the line (or row id) and the column, never later.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from ..bilm.errors import InputError
from .rows import BadRowError, checked_text, checked_tokens, row_words
from .sources import JSONL, PARQUET, TEXT, CorpusFile

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
ID_TYPES = {int: "integer", str: "string"}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Block:
    """Block `index` of a file: its rows as a table with an `id` column, and the bytes of the
    file they span (estimated for Parquet), for progress in bytes."""

    index: int
    table: Any
    start_byte: int
    end_byte: int


def open_binary(file: CorpusFile) -> IO[bytes]:
    if file.size is None:  # a pipe: Python reads it once, in order
        return open(file.path, "rb")  # noqa: SIM115 (closed by the caller's with)
    return io.BufferedReader(file.filesystem.open_input_stream(file.path), buffer_size=1 << 20)


def decoded_lines(file: CorpusFile) -> Iterator[tuple[int, str, int]]:
    """(line number from 1, text without its line ending, byte offset after the line)."""
    offset = 0
    with open_binary(file) as handle:
        for number, raw in enumerate(handle, start=1):
            start = offset
            offset += len(raw)
            if number == 1 and raw.startswith(BYTE_ORDER_MARK):
                raw, start = raw[len(BYTE_ORDER_MARK) :], start + len(BYTE_ORDER_MARK)
                if not raw:  # a file of only a byte-order mark has no lines
                    return
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"{file.name}, line {number} is not UTF-8 ({error.reason} at byte "
                    f"{start + error.start:,} of the file): save the file as UTF-8."
                ) from None
            yield number, line.rstrip("\r\n"), offset


def read_blocks(file: CorpusFile, block_rows: int, *, name_ids: bool) -> Iterator[Block]:
    """The file's rows in blocks of `block_rows` (the last may be shorter).

    name_ids (bool): text ids are `NAME:LINE` (an input of several files), else the line number.
    """
    if file.kind == PARQUET:
        yield from parquet_blocks(file, block_rows)
        return
    rows: list[dict[str, Any]] = []
    first_line = index = start_byte = 0
    id_type: type | None = None
    for number, line, end_byte in decoded_lines(file):
        if file.kind == TEXT:
            rows.append({"id": f"{file.name}:{number}" if name_ids else number, "text": line})
        elif not line.strip():  # a JSON line without an object holds no row (a trailing newline)
            continue
        else:
            row = json_row(file, number, line)
            id_type = id_type or type(row["id"])
            if type(row["id"]) is not id_type:
                raise InputError(
                    f"{file.name}, line {number}: id {row['id']!r} is a {ID_TYPES[type(row['id'])]}, but the "
                    f"ids before it are {ID_TYPES[id_type]}s: give every row an id of one type."
                )
            rows.append(row)
        first_line = first_line or number
        if len(rows) == block_rows:
            yield Block(index, rows_table(file, rows, first_line, number), start_byte, end_byte)
            rows, first_line, index, start_byte = [], 0, index + 1, end_byte
    if rows:
        yield Block(index, rows_table(file, rows, first_line, number), start_byte, end_byte)


def json_row(file: CorpusFile, number: int, line: str) -> dict[str, Any]:
    where = f"{file.name}, line {number}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"{where} is not JSON ({error.msg}): give one JSON object per line.") from None
    if not isinstance(row, dict) or "id" not in row:
        raise InputError(f'{where} is not an object with an "id": write {{"id": ..., "text": ...}}.')
    if type(row["id"]) not in ID_TYPES:
        raise InputError(
            f"{where}: id {row['id']!r} is a {type(row['id']).__name__}: an id is an integer or a string."
        )
    if type(row["id"]) is int and not INT64_MIN <= row["id"] <= INT64_MAX:
        raise InputError(
            f"{where}: id {row['id']} does not fit in a 64-bit integer (-2**63 to 2**63-1), which the "
            f'output stores: write it as a string ("{row["id"]}"), in every row of the file.'
        )
    try:
        source, words = row_words(row["id"], row.get("text"), row.get("tokens"))
        (checked_tokens if source == "tokens" else checked_text)(row["id"], words)
    except BadRowError as error:
        raise BadRowError(f"{where}: {error}") from None
    return row


def rows_table(file: CorpusFile, rows: list[dict[str, Any]], first: int, last: int) -> Any:
    import pyarrow

    names = list(dict.fromkeys(name for row in rows for name in row))  # every row's keys, not the first's
    try:
        return pyarrow.Table.from_pydict({name: [row.get(name) for row in rows] for name in names})
    except (pyarrow.ArrowException, UnicodeError, OverflowError) as error:
        raise InputError(
            f"{file.name}, lines {first}-{last}: a column holds values of different types, or text that "
            f"is not valid Unicode ({error}): give each key one type in every row."
        ) from None


def parquet_blocks(file: CorpusFile, block_rows: int) -> Iterator[Block]:
    import pyarrow
    import pyarrow.parquet

    try:
        parquet = pyarrow.parquet.ParquetFile(file.filesystem.open_input_file(file.path))
    except (pyarrow.ArrowException, OSError) as error:
        raise InputError(f"{file.name} is not a Parquet file ({error}).") from None
    schema = parquet.schema_arrow
    if "id" not in schema.names:
        raise InputError(f'{file.name} has no "id" column (it has: {", ".join(schema.names)}).')
    id_type = schema.field("id").type
    if not (pyarrow.types.is_integer(id_type) or pyarrow.types.is_string(id_type)):
        raise InputError(f"{file.name}: its id column holds {id_type}: an id is an integer or a string.")
    total = max(1, parquet.metadata.num_rows)
    done = index = 0
    for batch in parquet.iter_batches(batch_size=block_rows):
        if batch.column("id").null_count:
            row = done + batch.column("id").is_null().to_pylist().index(True) + 1
            raise InputError(
                f"{file.name}, row {row:,}: its id is null: give every row an id (an integer or a string)."
            )
        if batch.num_rows:
            start_byte, done = (file.size or 0) * done // total, done + batch.num_rows
            yield Block(
                index, pyarrow.Table.from_batches([batch]), start_byte, (file.size or 0) * done // total
            )
            index += 1


def id_kind(table: Any) -> str:
    """ "integer" or "string": what a block's ids are, for the one-type rule across files."""
    import pyarrow

    return "integer" if pyarrow.types.is_integer(table.schema.field("id").type) else "string"


__all__ = ["JSONL", "PARQUET", "TEXT", "Block", "id_kind", "read_blocks"]
