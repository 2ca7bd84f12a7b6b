"""The torch module held by a Thinc `PyTorchShim`, read and replaced in one place.

Thinc 8.3 keeps the module in the shim's private `_model` attribute and offers no public
accessor. Every read and write goes through here, so a Thinc release that renames the attribute
changes one module: where `_model` is missing, the shim's one attribute that holds a torch module
is used instead, and a shim with none or several is a clear error.
"""

from __future__ import annotations

import torch
from thinc.api import Shim

from .errors import ElmoPipelineError

MODULE_ATTRIBUTE = "_model"


def _module_attribute(shim: Shim) -> str:
    """The name of the attribute that holds the shim's torch module."""
    if hasattr(shim, MODULE_ATTRIBUTE):
        return MODULE_ATTRIBUTE
    names = [name for name, value in vars(shim).items() if isinstance(value, torch.nn.Module)]
    if len(names) != 1:
        import thinc

        raise ElmoPipelineError(
            f"Cannot find the torch module inside Thinc's {type(shim).__name__} (thinc {thinc.__version__}): "
            f"it has no {MODULE_ATTRIBUTE!r} attribute and {len(names)} attributes holding a torch "
            "module. spacy-elmo supports thinc>=8.3,<8.4: install a version in that range."
        )
    return names[0]


def shim_module(shim: Shim) -> torch.nn.Module:
    """The torch module the shim runs."""
    return getattr(shim, _module_attribute(shim))


def set_shim_module(shim: Shim, module: torch.nn.Module) -> None:
    """Make the shim run `module` from now on."""
    setattr(shim, _module_attribute(shim), module)
