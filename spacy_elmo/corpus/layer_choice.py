"""The names of the `vectors` column's choices, without numpy: the command line's options and
the job's checks read them before any row is."""

from __future__ import annotations

from typing import Literal, get_args

LayerChoice = Literal["all", "top", "average", "mix", "none"]
"""What the `vectors` column holds: every layer (L + 1, n, D), the top one or the layers' mean
(n, D), the component's scalar mix (n, D, `token._.elmo`), or no vectors at all."""
LAYER_CHOICES: tuple[LayerChoice, ...] = get_args(LayerChoice)
