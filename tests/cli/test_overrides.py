"""`pretrain` and `fine-tune` read config overrides as spaCy's CLI writes them."""

from __future__ import annotations

import pytest

from spacy_elmo.bilm.errors import ConfigError
from spacy_elmo.cli.overrides import parse_overrides


def test_overrides_are_parsed_as_spacys_cli_writes_them() -> None:
    args = [
        "--training.max_steps",
        "100",
        "--corpus.path=a b.txt",
        "--model.use-skip",
        "--x.list",
        "[1, 2]",
    ]
    assert parse_overrides(args) == {
        "training.max_steps": 100,
        "corpus.path": "a b.txt",
        "model.use_skip": True,
        "x.list": [1, 2],
    }
    assert args[0] == "--training.max_steps"  # the caller's list is left as it was


@pytest.mark.parametrize("args", [["--max_steps", "100"], ["training.max_steps", "100"]])
def test_an_argument_that_is_no_override_is_named(args: list[str]) -> None:
    with pytest.raises(ConfigError, match=f"{args[0]!r} is not a config override"):
        parse_overrides(args)
