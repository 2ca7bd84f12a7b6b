"""Where a run cuts its input into output files. Each output file (a part) holds consecutive rows
of one input file: `rows_per_file` of them, or as many as make about `target_bytes` of Parquet.
The cut is decided by the read task from the rows themselves, the same way in every run, so a
resumed run finds the parts already written under the same names.

The size of a part is estimated before it is computed: its tokens (words split on whitespace, or
the `tokens` given) times the bytes a token's output takes (`bytes_per_token`: its vectors as
float32, plus its text and annotations). A pipeline's tokenizer splits a little more finely than
whitespace, so its files come out somewhat larger than the target.

Small inputs would fit in one file, and one file is one writer's work: `max_input_bytes` caps the
input bytes of a part so that every worker gets some (recorded by the run at its start).

Only pyarrow is imported here, for the read tasks (`blocks.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ...bilm.errors import InputError
from ..reading import Block, read_blocks
from ..sources import CorpusFile

# rows read at a time while a part is gathered: parts end on a multiple of it (or a file's end)
READ_ROWS = 64
# a token's text, offsets and annotations in Parquet, beside its vectors (an estimate)
TOKEN_OVERHEAD_BYTES = 16
# the least input a part of a small run holds: below it, files get smaller than spreading needs
MIN_PART_INPUT_BYTES = 64 * 1024


@dataclass(frozen=True)
class PartCut:
    """How a run cuts input files into parts (see the module's docstring); recorded in the run
    folder at its start and used again by `--resume`."""

    rows_per_file: int | None
    target_bytes: int
    bytes_per_token: int
    max_input_bytes: int | None

    @classmethod
    def for_run(
        cls,
        rows_per_file: int | None,
        target_bytes: int,
        bytes_per_token: int,
        total_input_bytes: int | None,
        workers: int,
    ) -> PartCut:
        spread = None
        if rows_per_file is None and total_input_bytes is not None:
            spread = max(MIN_PART_INPUT_BYTES, total_input_bytes // (2 * workers))
        return cls(rows_per_file, target_bytes, bytes_per_token, spread)

    def parts(self, file: CorpusFile, *, name_ids: bool) -> Iterator[Block]:
        """The file's rows, one block per output part, numbered from 0."""
        if self.rows_per_file is not None:
            yield from read_blocks(file, self.rows_per_file, name_ids=name_ids)
            return
        pending: list[Block] = []
        estimate = index = 0
        for block in read_blocks(file, READ_ROWS, name_ids=name_ids):
            pending.append(block)
            estimate += estimated_tokens(block.table) * self.bytes_per_token
            input_bytes = block.end_byte - pending[0].start_byte
            if estimate >= self.target_bytes or (
                self.max_input_bytes and input_bytes >= self.max_input_bytes
            ):
                yield joined(file, index, pending)
                pending, estimate, index = [], 0, index + 1
        if pending:
            yield joined(file, index, pending)

    def rows_for_dataset(self, default_tokens_per_row: int = 32) -> int:
        """Rows of one part of a Dataset, whose rows are not read before they are cut: as given,
        or the target over an assumed sentence length."""
        if self.rows_per_file is not None:
            return self.rows_per_file
        return max(1, self.target_bytes // (default_tokens_per_row * self.bytes_per_token))


def estimated_tokens(table: pa.Table) -> int:
    """Tokens of a block's rows: `tokens` counted, `text` split on whitespace."""
    total = 0
    tokens_type = table.schema.field("tokens").type if "tokens" in table.schema.names else pa.null()
    if pa.types.is_list(tokens_type) or pa.types.is_large_list(tokens_type):
        total += int(pc.sum(pc.list_value_length(table.column("tokens"))).as_py() or 0)
    text_type = table.schema.field("text").type if "text" in table.schema.names else pa.null()
    if pa.types.is_string(text_type) or pa.types.is_large_string(text_type):
        words = pc.count_substring_regex(table.column("text"), r"\S+")
        total += int(pc.sum(words).as_py() or 0)
    return total


def joined(file: CorpusFile, index: int, blocks: list[Block]) -> Block:
    """Consecutive blocks of one file as one; JSON rows of other keys leave a key's value empty."""
    try:
        table = pa.concat_tables([block.table for block in blocks], promote_options="default")
    except pa.ArrowException as error:
        raise InputError(
            f"{file.name}: a column holds values of different types in different rows ({error}): give each "
            "key one type in every row."
        ) from None
    return Block(index, table, blocks[0].start_byte, blocks[-1].end_byte)
