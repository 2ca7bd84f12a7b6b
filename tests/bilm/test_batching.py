"""`budget_batches`: length-sorted batches within a padded-size budget and a row limit."""

from __future__ import annotations

import random

import pytest

from spacy_elmo.bilm.batching import budget_batches


def random_lengths(seed: int) -> list[int]:
    generator = random.Random(seed)
    return [generator.choice([0, 1, 2, 3, 5, 8, 13, 40]) for _ in range(generator.randint(0, 60))]


@pytest.mark.parametrize("seed", range(50))
def test_longest_first_batches_hold_every_item_once_within_the_budget(seed: int) -> None:
    lengths = random_lengths(seed)
    budget, max_rows = random.Random(-seed).randint(1, 120), random.Random(seed).randint(1, 12)
    produced = budget_batches(lengths, budget, max_rows=max_rows)
    flat = [index for batch in produced for index in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[index] for index in flat] == sorted(lengths, reverse=True)
    for batch in produced:
        assert 1 <= len(batch) <= max_rows
        padded_size = len(batch) * max(lengths[index] for index in batch)
        assert padded_size <= budget or len(batch) == 1, (batch, padded_size)


def test_equal_lengths_keep_their_input_order() -> None:
    assert budget_batches([2, 5, 2, 5], None) == [[1, 3, 0, 2]]
    assert budget_batches([2, 5, 2, 5], None, order="shortest_first") == [[0, 2, 1, 3]]


def test_an_item_over_the_budget_goes_alone() -> None:
    assert budget_batches([5, 1, 9, 3, 3, 7], 8) == [[2], [5], [0], [3, 4], [1]]


def test_shortest_first_batches_grow_until_the_longest_item_breaks_the_budget() -> None:
    lengths = [length + 1 for length in (3, 40, 1, 7, 7, 2, 60, 9)]  # steps of each sentence
    assert budget_batches(lengths, 24, order="shortest_first") == [[2, 5, 0], [3, 4], [7], [1], [6]]


def test_given_order_is_kept_and_only_rows_and_budget_cut_it() -> None:
    assert budget_batches([1, 9, 1, 1, 1], None, max_rows=2, order="as_given") == [[0, 1], [2, 3], [4]]
    assert budget_batches([1, 9, 1, 1], 18, order="as_given") == [[0, 1], [2, 3]]


def test_no_items_give_no_batches() -> None:
    assert budget_batches([], 10) == []
