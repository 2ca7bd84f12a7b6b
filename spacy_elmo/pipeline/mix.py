"""The task-specific scalar mix as a Thinc layer: `bilm.ScalarMix` behind a `PyTorchShim`.

(L + 1, n, 2P) per doc -> (n, width) per doc. The torch module owns the mix, its gamma, dropout
and L2 penalty; this layer concatenates the docs' tokens into one (L + 1, N, 2P) tensor, hands it
to the module, splits the result back per doc and, when a width is given, projects it with a
Thinc `Linear`. Its weights are saved as safetensors (no pickle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import srsly
import torch
from thinc.api import ArgsKwargs, Linear, Model, PyTorchShim, torch2xp, xp2torch
from thinc.types import Floats1d, Floats2d, Floats3d

from ..bilm.scalar_mix import ScalarMix
from .errors import ElmoPipelineError, ElmoSettingError
from .shims import set_shim_module, shim_module

MixModel = Model[list[Floats3d], list[Floats2d]]


class UnsizedScalarMix(torch.nn.Module):
    """Holds a mix's settings until `initialize` knows the number of biLM layers."""

    def __init__(self, *, dropout: float, l2_coefficient: float) -> None:
        super().__init__()
        self.dropout = dropout
        self.l2_coefficient = l2_coefficient

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise ElmoPipelineError(
            "The ELMo scalar mix was used before it was initialized: initialize the component that "
            "owns it (nlp.initialize()), or load a trained pipeline with spacy.load()."
        )


def sized_mix(settings: UnsizedScalarMix | ScalarMix, n_layers: int) -> ScalarMix:
    """A fresh `ScalarMix` of `n_layers` with the dropout and L2 settings `settings` holds."""
    return ScalarMix(n_layers, dropout=settings.dropout, l2_coefficient=settings.l2_coefficient)


def check_mix_settings(dropout: float, l2_lambda: float) -> None:
    """The listener config's mix settings, checked when the model is built."""
    if not (l2_lambda >= 0 and 0 <= dropout < 1):
        raise ElmoSettingError(
            f"l2_lambda ({l2_lambda}) must be >= 0 and dropout ({dropout}) in [0, 1) in the ELMo "
            "listener's config."
        )


def serialize_mix(module: torch.nn.Module) -> bytes:
    """msgpack {"weights": safetensors bytes of the state dict, empty before initialization}."""
    from safetensors.torch import save

    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in module.state_dict().items()}
    return srsly.msgpack_dumps({"weights": save(tensors) if tensors else b""})


def deserialize_mix(module: torch.nn.Module, data: bytes, device: torch.device) -> torch.nn.Module:
    """The `ScalarMix` that `serialize_mix` wrote, with the settings of the module it replaces."""
    from safetensors.torch import load

    weights = srsly.msgpack_loads(data)["weights"]
    if not weights:
        return module
    tensors = load(weights)
    mix = sized_mix(module, tensors["weights"].shape[0])  # type: ignore[arg-type]
    mix.load_state_dict(tensors)
    return mix.to(device)


def elmo_mix(*, width: int | None, dropout: float, l2_lambda: float, input_gradient: bool = True) -> MixModel:
    """(L + 1, n, 2P) per doc -> (n, width) per doc: `gamma * sum_j softmax(w)_j * layer_j`.

    Then dropout on the mixed vectors and, when `width` is given, a linear projection 2P ->
    width. `l2_lambda` is the paper's L2 penalty on the layer weights. nL and nI are inferred
    from the biLM at initialization. `attrs["input_gradient"]` says whether backprop returns the
    gradient of the layers (False when the biLM below is frozen: it saves computing it).
    """
    check_mix_settings(dropout, l2_lambda)
    shim = PyTorchShim(
        UnsizedScalarMix(dropout=dropout, l2_coefficient=l2_lambda),
        serialize_model=serialize_mix,
        deserialize_model=deserialize_mix,
    )
    return Model(
        "elmo_mix",
        elmo_mix_forward,
        init=elmo_mix_init,
        shims=[shim],
        layers=[] if width is None else [Linear(nO=width)],
        dims={"nL": None, "nI": None, "nO": width},
        attrs={"input_gradient": input_gradient},
    )


def scalar_mix(model: MixModel) -> ScalarMix | None:
    """The torch module of an `elmo_mix` layer, or None before initialization."""
    module = shim_module(model.shims[0])
    return module if isinstance(module, ScalarMix) else None


def mix_weights(model: MixModel) -> Floats1d:
    """The softmax-normalised layer weights (nL,) of an `elmo_mix` layer, as numpy."""
    module = scalar_mix(model)
    if module is None:
        raise ElmoPipelineError("The ELMo scalar mix has no weights before initialization.")
    return module.normalised_weights().detach().cpu().numpy()


def elmo_mix_init(model: MixModel, X: list[Floats3d] | None = None, Y: Any = None) -> MixModel:
    """Infer nL and nI from a sample of layer arrays (if not set already); build the module."""
    if X:
        model.set_dim("nL", X[0].shape[0], force=True)
        model.set_dim("nI", X[0].shape[2], force=True)
    if not model.has_dim("nL") or not model.has_dim("nI"):
        raise ElmoPipelineError(
            "The ELMo scalar mix cannot be initialized: the number and width of the biLM layers are "
            "unknown. Give it a sample of biLM layers, or link its listener to an elmo component."
        )
    shim = cast(PyTorchShim, model.shims[0])
    settings = cast(UnsizedScalarMix | ScalarMix, shim_module(shim))
    set_shim_module(shim, sized_mix(settings, model.get_dim("nL")).to(shim.device))
    if model.layers:
        model.layers[0].set_dim("nI", model.get_dim("nI"), force=True)
        model.layers[0].initialize()
    else:
        model.set_dim("nO", model.get_dim("nI"), force=True)
    return model


def check_layer_count(model: MixModel, layer_arrays: list[Floats3d]) -> None:
    """A mix learns one weight per biLM layer: layers of another biLM are an error, not a guess."""
    n_layers = model.get_dim("nL")
    if layer_arrays[0].shape[0] != n_layers:
        raise ElmoPipelineError(
            f"The ELMo scalar mix was built for {n_layers} biLM layers but received "
            f"{layer_arrays[0].shape[0]}: the biLM changed after the listener was initialized. "
            "Re-initialize the listening components (nlp.initialize())."
        )


def elmo_mix_forward(
    model: MixModel, layer_arrays: list[Floats3d], is_train: bool
) -> tuple[list[Floats2d], Callable[[list[Floats2d]], list[Floats3d]]]:
    """Mix all docs' tokens at once in torch, split per doc, project; backprop returns d(layers)
    per doc, or [] without `attrs["input_gradient"]`."""
    if not layer_arrays:
        return [], lambda d_outputs: []
    check_layer_count(model, layer_arrays)
    ops, shim = model.ops, cast(PyTorchShim, model.shims[0])
    split_points = np.cumsum([array.shape[1] for array in layer_arrays])[:-1]
    input_gradient = is_train and model.attrs["input_gradient"]
    concatenated = ops.xp.concatenate(layer_arrays, axis=1)  # (L + 1, N, 2P)
    layers = xp2torch(concatenated, requires_grad=input_gradient, device=shim.device)
    mixed_tensor, torch_backprop = shim(ArgsKwargs(args=(layers,), kwargs={}), is_train)
    mixed = cast(Floats2d, torch2xp(mixed_tensor, ops=ops))  # (N, 2P)
    outputs, backprop_projection = model.layers[0](mixed, is_train) if model.layers else (mixed, None)

    def backprop(d_outputs: list[Floats2d]) -> list[Floats3d]:
        d_output = ops.xp.concatenate(d_outputs, axis=0)
        d_mixed = backprop_projection(d_output) if backprop_projection is not None else d_output
        grad_tensors = xp2torch(ops.xp.ascontiguousarray(d_mixed), device=shim.device)
        d_inputs = torch_backprop(ArgsKwargs(args=(mixed_tensor,), kwargs={"grad_tensors": grad_tensors}))
        if not input_gradient:
            return []
        d_layers = torch2xp(d_inputs.args[0], ops=ops)  # (L + 1, N, 2P)
        return list(ops.xp.split(d_layers, split_points, axis=1))

    return list(ops.xp.split(outputs, split_points, axis=0)), backprop
