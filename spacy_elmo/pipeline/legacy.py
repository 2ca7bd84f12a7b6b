"""Version 1 of the listener's scalar mix, kept only so that pipelines trained with it load.

`spacy-elmo.ElmoListener.v1` and `spacy-elmo.Tok2VecElmo.v1` built this numpy layer (Thinc params
`layer_weights`, `gamma`, `W`, `b`, gradients written by hand). Pipelines saved with them keep
loading and predicting the same through these builders; new configs use the `.v2` names, whose mix
is `bilm.ScalarMix` (mix.py). See CHANGELOG.md for moving a pipeline to v2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from thinc.api import Model, glorot_uniform_init
from thinc.types import Floats1d, Floats2d, Floats3d

from .errors import ElmoPipelineError
from .mix import MixModel, check_layer_count, check_mix_settings


def elmo_mix_v1(
    *, width: int | None, dropout: float, l2_lambda: float, input_gradient: bool = True
) -> MixModel:
    """(L + 1, n, 2P) per doc -> (n, width) per doc: `gamma * sum_j softmax(w)_j * layer_j`.

    Then dropout on the mixed vectors and, when `width` is given, a linear projection 2P ->
    width. The L2 penalty `l2_lambda * ||w||^2` on the layer weights (the paper's lambda) is added
    to their gradient. nL and nI are inferred from the biLM at initialization.
    """
    check_mix_settings(dropout, l2_lambda)
    return Model(
        "elmo_mix",
        elmo_mix_forward,
        init=elmo_mix_init,
        dims={"nL": None, "nI": None, "nO": width},
        params={"layer_weights": None, "gamma": None, "W": None, "b": None},
        # Not thinc's "dropout_rate": spaCy's update sets that on every node to [training] dropout,
        # which would silently replace the rate the listener's config asks for.
        attrs={
            "project": width is not None,
            "mix_dropout": dropout,
            "l2_lambda": l2_lambda,
            "input_gradient": input_gradient,
        },
    )


def elmo_mix_init(model: MixModel, X: list[Floats3d] | None = None, Y: Any = None) -> MixModel:
    """Infer nL and nI from a sample of layer arrays (if not set already) and allocate params."""
    if X is not None and X:
        model.set_dim("nL", X[0].shape[0])
        model.set_dim("nI", X[0].shape[2])
    if not model.has_dim("nL") or not model.has_dim("nI"):
        raise ElmoPipelineError(
            "The ELMo scalar mix cannot be initialized: the number and width of the biLM layers are "
            "unknown. Give it a sample of biLM layers, or link its listener to an elmo component."
        )
    n_layers, n_inputs = model.get_dim("nL"), model.get_dim("nI")
    model.set_param("layer_weights", model.ops.alloc1f(n_layers))
    model.set_param("gamma", model.ops.asarray1f([1.0]))
    if model.attrs["project"]:
        n_outputs = model.get_dim("nO")
        model.set_param("W", glorot_uniform_init(model.ops, (n_outputs, n_inputs)))
        model.set_param("b", model.ops.alloc1f(n_outputs))
    else:
        model.set_dim("nO", n_inputs)
    return model


def mix_weights_v1(model: MixModel) -> Floats1d:
    """The softmax-normalised layer weights (nL,) of a version 1 mix layer."""
    weights = model.get_param("layer_weights")
    exponentials = model.ops.xp.exp(weights - weights.max())
    return exponentials / exponentials.sum()


def mix_summary_v1(model: MixModel) -> dict[str, Any]:
    """{"weights": softmax-normalised layer weights, "gamma": scale} of a version 1 mix layer."""
    return {"weights": [float(w) for w in mix_weights_v1(model)], "gamma": float(model.get_param("gamma")[0])}


def elmo_mix_forward(
    model: MixModel, layer_arrays: list[Floats3d], is_train: bool
) -> tuple[list[Floats2d], Callable[[list[Floats2d]], list[Floats3d]]]:
    """Mix, drop out and project each doc's layers; backprop returns d(layers) per doc, or []
    without `attrs["input_gradient"]`."""
    return mix_layers(model, layer_arrays, is_train, input_gradient=model.attrs["input_gradient"])


def mix_layers(
    model: MixModel, layer_arrays: list[Floats3d], is_train: bool, *, input_gradient: bool
) -> tuple[list[Floats2d], Callable[[list[Floats2d]], list[Floats3d]]]:
    """The mix's forward pass. Without `input_gradient` (a frozen biLM) backprop only updates the
    mix's own parameters and returns [] instead of an (L + 1, n, 2P) gradient per doc."""
    if not layer_arrays:
        return [], lambda d_outputs: []
    ops = model.ops
    check_layer_count(model, layer_arrays)
    lengths = [array.shape[1] for array in layer_arrays]
    layers = ops.xp.concatenate(layer_arrays, axis=1)  # (L + 1, N, 2P) for all docs
    weights = mix_weights_v1(model)
    gamma = model.get_param("gamma")[0]
    combined = ops.xp.tensordot(weights, layers, axes=(0, 0))  # (N, 2P)
    mixed = gamma * combined
    rate = model.attrs["mix_dropout"] if is_train else 0.0
    mask = ops.get_dropout_mask(mixed.shape, rate) if rate else None
    dropped = mixed * mask if mask is not None else mixed
    project = model.attrs["project"]
    outputs = (
        ops.gemm(dropped, model.get_param("W"), trans2=True) + model.get_param("b") if project else dropped
    )
    split_points = np.cumsum(lengths)[:-1]

    def backprop(d_outputs: list[Floats2d]) -> list[Floats3d]:
        d_output = ops.xp.concatenate(d_outputs, axis=0) if d_outputs else ops.alloc2f(0, outputs.shape[1])
        if project:
            model.inc_grad("W", ops.gemm(d_output, dropped, trans1=True))
            model.inc_grad("b", d_output.sum(axis=0))
            d_dropped = ops.gemm(d_output, model.get_param("W"))
        else:
            d_dropped = d_output
        d_mixed = d_dropped * mask if mask is not None else d_dropped
        model.inc_grad("gamma", ops.asarray1f([float((d_mixed * combined).sum())]))
        d_combined = gamma * d_mixed
        d_weights = ops.xp.tensordot(layers, d_combined, axes=((1, 2), (0, 1)))  # (L + 1,)
        d_logits = weights * (d_weights - (weights * d_weights).sum())
        layer_weights = model.get_param("layer_weights")
        model.inc_grad("layer_weights", d_logits + 2.0 * model.attrs["l2_lambda"] * layer_weights)
        if not input_gradient:
            return []
        d_layers = weights[:, None, None] * d_combined[None]  # (L + 1, N, 2P)
        return list(ops.xp.split(d_layers, split_points, axis=1))

    return list(ops.xp.split(outputs, split_points, axis=0)), backprop
