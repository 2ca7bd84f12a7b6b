"""The names of the biLM's precision modes, without torch: command-line options and checks read
them before (or without) loading a model."""

from __future__ import annotations

from typing import Literal, get_args

Precision = Literal["fp32", "bf16", "int8"]
"""How one product runs."""
PrecisionChoice = Literal["fp32", "bf16", "int8", "auto"]
"""What `BiLM.set_precision` and the component's `precision` setting accept."""
PRECISION_CHOICES: tuple[PrecisionChoice, ...] = get_args(PrecisionChoice)
"""`PrecisionChoice`'s names, for checks and messages at run time."""
REDUCED_MODES: tuple[Precision, ...] = ("bf16", "int8")
