"""The torch module held by a Thinc `PyTorchShim`, read and replaced in one place.

Thinc 8.3 (setup.cfg allows thinc>=8.3,<8.4) keeps the module in the shim's private `_model`
attribute and offers no public accessor: every read and write goes through here.
"""

from __future__ import annotations

import torch
from thinc.api import Shim


def shim_module(shim: Shim) -> torch.nn.Module:
    """The torch module the shim runs."""
    return shim._model


def set_shim_module(shim: Shim, module: torch.nn.Module) -> None:
    """Make the shim run `module` from now on."""
    shim._model = module
