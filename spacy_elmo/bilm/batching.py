"""Batches of sequences with a padded-size budget: the one batcher of the biLM, the `elmo`
component and evaluation.

A batch of sequences is padded to its longest one, so its cost is rows x longest. Sorting by length
first puts similar lengths together and wastes little padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

BatchOrder = Literal["longest_first", "shortest_first", "as_given"]


def budget_batches(
    lengths: Sequence[int],
    max_padded_size: int | None,
    *,
    max_rows: int | None = None,
    order: BatchOrder = "longest_first",
) -> list[list[int]]:
    """Cut the items `0 .. len(lengths) - 1` into batches of item indices.

    The items are taken in `order` (sorts are stable: equal lengths keep their input order) and cut
    into consecutive runs: a batch grows until one more item would give it more than `max_rows`
    rows or a padded size (rows x longest length) over `max_padded_size`. An item longer than the
    budget forms a batch of its own. `None` means no limit.

    Args:
        lengths: each item's padded length, e.g. its tokens plus the boundary positions it gets.
        max_padded_size: the most rows x longest length a batch may have.
        max_rows: the most items a batch may have.
        order: "longest_first" (descending length), "shortest_first" (ascending length) or
            "as_given" (input order, for stateful models whose outputs depend on it).
    Returns:
        The batches, each a list of indices into `lengths`; every index occurs exactly once.
    """
    if order == "as_given":
        indices = list(range(len(lengths)))
    else:
        indices = sorted(range(len(lengths)), key=lengths.__getitem__, reverse=order == "longest_first")
    batches: list[list[int]] = []
    batch: list[int] = []
    longest = 0
    for index in indices:
        candidate_longest = max(longest, lengths[index])
        too_many_rows = max_rows is not None and len(batch) == max_rows
        over_budget = max_padded_size is not None and candidate_longest * (len(batch) + 1) > max_padded_size
        if batch and (too_many_rows or over_budget):
            batches.append(batch)
            batch, candidate_longest = [], lengths[index]
        batch.append(index)
        longest = candidate_longest
    if batch:
        batches.append(batch)
    return batches
