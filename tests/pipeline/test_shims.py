"""The one place that reads and writes Thinc's private shim attribute."""

from __future__ import annotations

import torch
from thinc.api import PyTorchShim

from spacy_elmo.pipeline.shims import set_shim_module, shim_module


def test_reads_and_replaces_the_module_of_a_thinc_shim() -> None:
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(3, 3)
    shim = PyTorchShim(first)
    assert shim_module(shim) is first
    set_shim_module(shim, second)
    assert shim_module(shim) is second
    assert shim._model is second  # the attribute Thinc itself runs
