"""The one place that reads Thinc's private shim attribute, and its fallback without it."""

from __future__ import annotations

import pytest
import torch
from thinc.api import PyTorchShim

from spacy_elmo.pipeline import ElmoPipelineError
from spacy_elmo.pipeline.shims import set_shim_module, shim_module


def test_reads_and_replaces_the_module_of_a_thinc_shim() -> None:
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(3, 3)
    shim = PyTorchShim(first)
    assert shim_module(shim) is first
    set_shim_module(shim, second)
    assert shim_module(shim) is second
    assert shim._model is second  # the attribute Thinc itself runs


class RenamedShim:
    """A shim as a future Thinc might write it: the module under another private name."""

    def __init__(self, module: torch.nn.Module) -> None:
        self._torch_module = module
        self.device = "cpu"


def test_without_the_private_attribute_the_one_module_attribute_is_used() -> None:
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(3, 3)
    shim = RenamedShim(first)
    assert shim_module(shim) is first
    set_shim_module(shim, second)
    assert shim._torch_module is second and not hasattr(shim, "_model")


def test_a_shim_with_no_module_attribute_is_a_clear_error() -> None:
    shim = RenamedShim(torch.nn.Linear(2, 2))
    shim.other = torch.nn.Linear(1, 1)  # two candidates: no guess
    with pytest.raises(ElmoPipelineError, match="2 attributes holding a torch module.*thinc>=8.3,<8.4"):
        shim_module(shim)
