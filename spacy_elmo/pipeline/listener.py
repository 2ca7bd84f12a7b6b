"""`ElmoListener`: a downstream component's window onto the shared `elmo` component.

During `nlp.update` the `elmo` component runs the biLM once per batch and hands every listener
the layers and a backprop callback (`receive`); each listener mixes them with its own
`ElmoMix` (the paper's task-specific `ELMo_task`). At prediction time, and when `elmo` is frozen
and annotating, the listener reads the layers from `doc._.elmo`; docs without them are embedded
by the linked upstream biLM.

It is deliberately not a subclass of spaCy's `Tok2VecListener`: spaCy's `tok2vec` component must
not claim it, and our `elmo` component claims only this class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from spacy.tokens import Doc
from spacy.vocab import Vocab
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from .errors import ElmoPipelineError
from .layers import ElmoLayersModel, get_bilm
from .listener_errors import calling_pipeline, missing_upstream_message
from .mix import MixModel

UpstreamBackprop = Callable[[list[Floats3d]], Any]


class UpstreamLink:
    """The listener's reference to its upstream model and to the vocab of the `elmo` component
    that linked it: the docs of that component's pipeline share the vocab, so a listener sourced
    into another pipeline can tell its old `elmo` from its new pipeline's. Copies of a listener
    (spaCy deep-copies models for `nlp.rehearse`) share the link instead of copying the biLM."""

    def __init__(self) -> None:
        self.model: ElmoLayersModel | None = None
        self.vocab: Vocab | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> UpstreamLink:
        return self


class ElmoListener(Model):
    """Receives the biLM layers of a batch from an upstream `elmo` component."""

    name = "elmo_listener"

    def __init__(self, upstream_name: str, mix: MixModel) -> None:
        """upstream_name (str): name of the `elmo` component to listen to, or "*" for any.
        mix (Model): the listener's own scalar mix (+ optional projection)."""
        Model.__init__(
            self,
            name=self.name,
            forward=listener_forward,
            init=listener_init,
            layers=[mix],
            dims={"nO": mix.maybe_get_dim("nO")},
        )
        self.upstream_name = upstream_name
        self._upstream = UpstreamLink()
        self._batch_id: int | None = None
        self._outputs: list[Floats3d] | None = None
        self._backprop: UpstreamBackprop | None = None

    @property
    def mix(self) -> MixModel:
        return self.layers[0]

    @property
    def upstream_model(self) -> ElmoLayersModel | None:
        """The linked `elmo` component's model (set by its `add_listener`), or None."""
        return self._upstream.model

    def link_upstream(self, model: ElmoLayersModel | None, vocab: Vocab | None) -> None:
        """Read the biLM layers of `model`, the model of the `elmo` component whose vocab is
        `vocab` (None, None: unlink)."""
        self._upstream.model, self._upstream.vocab = model, vocab

    @staticmethod
    def get_batch_id(docs: Iterable[Doc]) -> int:
        """A content hash of a batch (same as spaCy's listeners): sum of token orth ids."""
        return sum(sum(token.orth for token in doc) for doc in docs)

    def receive(self, batch_id: int, outputs: list[Floats3d], backprop: UpstreamBackprop | None) -> None:
        """Store a batch's layers (L + 1, n, 2P) per doc and the upstream backprop, None when
        the biLM is frozen. They are released as soon as the listener has used them."""
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop

    def take_received(self, docs: list[Doc]) -> tuple[list[Floats3d], UpstreamBackprop | None]:
        """The received batch, checked against `docs`; the listener forgets it."""
        batch_id = self.get_batch_id(docs)
        if batch_id != self._batch_id or self._outputs is None or len(self._outputs) != len(docs):
            raise ElmoPipelineError(
                "An ELMo listener received the biLM layers of another batch than the one its component "
                "is updating. Update 'elmo' and its listening components together in one nlp.update "
                "call, with the same examples."
            )
        outputs, backprop = self._outputs, self._backprop
        self._batch_id, self._outputs, self._backprop = None, None, None
        return outputs, backprop


def listener_init(model: ElmoListener, X: Any = None, Y: Any = None) -> ElmoListener:
    """Take nL and nI from the linked upstream biLM, then initialize the mix.

    Whether the upstream belongs to the pipeline of the docs is checked when docs reach the
    listener without `doc._.elmo` (`stored_layers`)."""
    upstream = model.upstream_model
    if upstream is None or get_bilm(upstream) is None:
        raise ElmoPipelineError(missing_upstream_message(model, model.upstream_name, calling_pipeline()))
    mix = model.mix
    mix.set_dim("nL", upstream.get_dim("nL"), force=True)
    mix.set_dim("nI", upstream.get_dim("nO"), force=True)
    mix.initialize()
    model.set_dim("nO", mix.get_dim("nO"), force=True)
    return model


def usable_upstream(model: ElmoListener, docs: list[Doc]) -> ElmoLayersModel | None:
    """The linked `elmo` model if it holds weights and belongs to the pipeline of `docs` (a
    component sourced into a pipeline without its `elmo` still holds the link to the source's,
    whose vocab is not the docs'); None otherwise."""
    upstream, vocab = model.upstream_model, model._upstream.vocab
    if upstream is None or get_bilm(upstream) is None:
        return None
    if vocab is not None and any(doc.vocab is not vocab for doc in docs):
        return None
    return upstream


def listener_forward(
    model: ElmoListener, docs: list[Doc], is_train: bool
) -> tuple[list[Floats2d], Callable[[list[Floats2d]], list[Doc]]]:
    """Mix the received (training) or stored (`doc._.elmo`) layers."""
    upstream_backprop: UpstreamBackprop | None = None
    if is_train and model._batch_id is not None:
        layer_arrays, upstream_backprop = model.take_received(docs)
    else:
        layer_arrays = stored_layers(model, docs)
    model.mix.attrs["input_gradient"] = upstream_backprop is not None
    outputs, mix_backprop = model.mix(layer_arrays, is_train)

    def backprop(d_outputs: list[Floats2d]) -> list[Doc]:
        d_layers = mix_backprop(d_outputs)
        if upstream_backprop is not None:
            upstream_backprop(d_layers)
        return []

    return outputs, backprop


def stored_layers(model: ElmoListener, docs: list[Doc]) -> list[Floats3d]:
    """`doc._.elmo.device_layers` of each doc (on the device the component computed them on);
    docs the elmo component has not annotated (it was excluded from an update, disabled, or
    `nlp.rehearse` ran this component first) are embedded by
    the linked upstream biLM without autograd. Without one, the listener raises: it never reads
    zeros in place of the biLM's layers."""
    annotated = Doc.has_extension("elmo")
    layer_arrays: list[Floats3d | None] = [
        model.ops.asarray3f(doc._.elmo.device_layers) if annotated and doc._.elmo is not None else None
        for doc in docs
    ]
    missing = [index for index, layers in enumerate(layer_arrays) if layers is None]
    if missing:
        unannotated = [docs[index] for index in missing]
        upstream = usable_upstream(model, unannotated)
        if upstream is None:
            raise ElmoPipelineError(missing_upstream_message(model, model.upstream_name, calling_pipeline()))
        for index, layers in zip(missing, upstream.predict(unannotated)):
            layer_arrays[index] = layers
    return layer_arrays  # type: ignore[return-value]
