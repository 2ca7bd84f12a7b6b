"""The biLM over spaCy Docs as a Thinc layer: every biLM layer of every token.

`elmo_layers` maps Docs to (L + 1, n_tokens, 2P) per doc; the scalar mix (mix.py) turns those into
one (n_tokens, width) matrix per doc. Listeners (listener.py) and the inline `Tok2VecElmo` are
built from these two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import srsly
import torch
from spacy.tokens import Doc
from thinc.api import ArgsKwargs, Model, PyTorchShim, get_torch_default_device, torch2xp, xp2torch
from thinc.types import Floats3d

from ..bilm.batching import budget_batches
from ..bilm.config import BiLMConfig
from ..bilm.io.state_dict import check_state_dict
from ..bilm.lexicon import Lexicon
from ..bilm.model import BiLM
from .errors import ElmoPipelineError, ElmoSettingError
from .shims import set_shim_module, shim_module

ElmoLayersModel = Model[list[Doc], list[Floats3d]]
ELMO_LAYERS = "elmo_layers"


NO_WEIGHTS_MESSAGE = (
    "The biLM has no weights yet. For the elmo component, run nlp.initialize() with "
    '[initialize.components.elmo.loader] set (e.g. @misc = "spacy-elmo.ModelDir.v1"), or load '
    "a trained pipeline with spacy.load(). An inline spacy-elmo.Tok2VecElmo.v1 gets its weights "
    'from nlp.replace_listeners("elmo", ...) on a pipeline whose elmo component has them.'
)


class MissingBiLM(torch.nn.Module):
    """Stands in for the biLM until `initialize` (or `from_disk`) provides the weights."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise ElmoPipelineError(NO_WEIGHTS_MESSAGE)


# -- serialisation of the biLM inside the pipeline: options JSON + safetensors, no pickle -----


def serialize_bilm(bilm: torch.nn.Module) -> bytes:
    """msgpack {"options": AllenNLP options or None, "weights": safetensors bytes}, and for a
    lexicon model (ELMoForManyLangs) "lexicon": its lexicon document."""
    from safetensors.torch import save

    if not isinstance(bilm, BiLM):
        return srsly.msgpack_dumps({"options": None, "weights": b""})
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in bilm.state_dict().items()}
    message = {"options": bilm.config.to_allennlp_options(), "weights": save(tensors)}
    if bilm.lexicon is not None:
        message["lexicon"] = bilm.lexicon.to_document()
    return srsly.msgpack_dumps(message)


def deserialize_bilm(_: torch.nn.Module, data: bytes, device: torch.device) -> torch.nn.Module:
    """Rebuild the biLM that `serialize_bilm` wrote (its config travels with the weights)."""
    from safetensors.torch import load

    message = srsly.msgpack_loads(data)
    if message["options"] is None:
        return MissingBiLM()
    config = BiLMConfig.from_allennlp_options(message["options"], source="the elmo component's data")
    tensors = load(message["weights"])
    check_state_dict(tensors, BiLM.state_dict_shapes(config), "the elmo component's data")
    lexicon_document = message.get("lexicon")  # only lexicon models have one
    lexicon = (
        None
        if lexicon_document is None
        else Lexicon.from_document(lexicon_document, "the elmo component's data")
    )
    bilm = BiLM(config, lexicon=lexicon)
    bilm.load_state_dict(tensors)
    return bilm.to(device)


def get_bilm(model: ElmoLayersModel) -> BiLM | None:
    """The biLM inside an `elmo_layers` model, or None before weights were loaded."""
    bilm = shim_module(model.shims[0])
    return bilm if isinstance(bilm, BiLM) else None


def set_bilm(model: ElmoLayersModel, bilm: BiLM) -> None:
    """Put a loaded biLM into an `elmo_layers` model and record its output dims (nL, nO)."""
    set_shim_module(model.shims[0], bilm.to(get_torch_default_device()))
    model.set_dim("nL", bilm.config.n_output_layers, force=True)
    model.set_dim("nO", bilm.config.output_dim, force=True)


# -- Docs -> biLM layers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """Tokens of one doc that the biLM reads as one sentence: indices of non-whitespace tokens."""

    doc_index: int
    token_indices: np.ndarray  # (n,) int64


def doc_segments(docs: Sequence[Doc], max_length: int) -> list[Segment]:
    """Split docs into biLM inputs: sentences when the doc has boundaries, else the whole doc,
    each cut into windows of at most `max_length` tokens. Whitespace tokens are left out, and
    so are segments that are left empty."""
    segments = []
    for doc_index, doc in enumerate(docs):
        spans = doc.sents if doc.has_annotation("SENT_START") else [doc[:]]
        for span in spans:
            indices = np.asarray([token.i for token in span if not token.is_space], dtype=np.int64)
            for start in range(0, len(indices), max_length):
                segments.append(Segment(doc_index, indices[start : start + max_length]))
    return segments


def is_elmo_layers(model: object) -> bool:
    """Whether `model` is the model of an `elmo` component (what `elmo_layers` builds)."""
    return isinstance(model, Model) and model.name == ELMO_LAYERS


def elmo_layers(*, max_length: int, max_batch_tokens: int) -> ElmoLayersModel:
    """Docs -> (L + 1, n_tokens, 2P) float32 per doc: every biLM layer of every spaCy token.

    The biLM reads each sentence (or window of `max_length` tokens when a doc has no sentence
    boundaries) separately: its LSTM states start from zero at every segment. Whitespace tokens
    are not shown to the biLM and get zero vectors. With `attrs["frozen"]` the biLM runs without
    autograd even in training and passes no gradient on.
    """
    if max_length < 1 or max_batch_tokens < 1:
        raise ElmoSettingError(
            f"max_length ({max_length}) and max_batch_tokens ({max_batch_tokens}) of "
            "[components.elmo.model] must be at least 1."
        )
    shim = PyTorchShim(MissingBiLM(), serialize_model=serialize_bilm, deserialize_model=deserialize_bilm)
    return Model(
        ELMO_LAYERS,
        elmo_layers_forward,
        shims=[shim],
        dims={"nL": None, "nO": None},
        attrs={"max_length": max_length, "max_batch_tokens": max_batch_tokens, "frozen": True},
    )


def elmo_layers_forward(
    model: ElmoLayersModel, docs: list[Doc], is_train: bool
) -> tuple[list[Floats3d], Callable[[list[Floats3d]], list[Doc]]]:
    """Run the biLM batch by batch; outputs are numpy/cupy arrays on the biLM's device (handed
    over by `torch2xp`, gradients back by `xp2torch`: no copy through the host on a GPU), torch
    graphs live only in the backprop closure (kept only when gradients can flow)."""
    shim = cast(PyTorchShim, model.shims[0])
    bilm = get_bilm(model)
    if bilm is None:
        raise ElmoPipelineError(NO_WEIGHTS_MESSAGE)
    n_layers, width = bilm.config.n_output_layers, bilm.config.output_dim
    outputs = [model.ops.alloc3f(n_layers, len(doc), width) for doc in docs]
    track_gradients = is_train and not model.attrs["frozen"]
    if track_gradients:  # Thinc's optimizer updates the weights in place through numpy, which leaves
        bilm.clear_token_cache()  # torch's version counters as they were: the cache cannot see it
    device = next(bilm.parameters()).device
    pending: list[tuple[list[Segment], torch.Tensor, Callable]] = []
    segments = doc_segments(docs, model.attrs["max_length"])
    lengths = [len(segment.token_indices) for segment in segments]
    for batch_indices in budget_batches(lengths, model.attrs["max_batch_tokens"]):
        batch = [segments[index] for index in batch_indices]
        sentences = [[docs[s.doc_index][int(i)].text for i in s.token_indices] for s in batch]
        char_ids, word_ids = bilm.sentences_to_ids(sentences)  # bytes, or the model's lexicon
        inputs = ArgsKwargs(
            args=(char_ids.to(device),), kwargs={} if word_ids is None else {"word_ids": word_ids.to(device)}
        )
        if track_gradients:
            (layers, _), torch_backprop = shim.begin_update(inputs)
            pending.append((batch, layers, torch_backprop))
        else:
            layers, _ = shim.predict(inputs)
        values = torch2xp(layers.detach().float(), ops=model.ops)  # (L + 1, B, T, 2P), same device
        for row, segment in enumerate(batch):
            outputs[segment.doc_index][:, segment.token_indices] = values[
                :, row, : len(segment.token_indices)
            ]

    def backprop(d_outputs: list[Floats3d]) -> list[Doc]:
        for batch, layers, torch_backprop in pending:
            d_values = model.ops.xp.zeros(tuple(layers.shape), dtype="float32")  # on the outputs' device
            for row, segment in enumerate(batch):
                gradient = d_outputs[segment.doc_index][:, segment.token_indices]
                d_values[:, row, : len(segment.token_indices)] = gradient
            d_layers = xp2torch(d_values, device=layers.device).to(layers.dtype)
            torch_backprop(ArgsKwargs(args=(layers,), kwargs={"grad_tensors": d_layers}))
        pending.clear()
        return []

    return outputs, backprop
