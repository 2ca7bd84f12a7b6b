"""Config overrides from a command's extra arguments, written as spaCy's CLI takes them:
`--section.key value`, `--section.key=value`, or `--section.flag` alone for true."""

from __future__ import annotations

import json
from typing import Any

from ..bilm.errors import ConfigError


def parse_value(text: str) -> Any:
    """A value as the config reads it (JSON: numbers, true, null, lists), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """`{"section.key": value}` for each override in `args`."""
    overrides: dict[str, Any] = {}
    rest = list(args)
    while rest:
        option = rest.pop(0)
        name, equals, value = option.removeprefix("--").partition("=")
        if not option.startswith("--") or "." not in name:
            raise ConfigError(
                f"{option!r} is not a config override: write --section.key VALUE, e.g. "
                "--training.max_steps 100."
            )
        if not equals:
            value = "true" if not rest or rest[0].startswith("--") else rest.pop(0)
        overrides[name.replace("-", "_")] = parse_value(value)
    return overrides
