"""Registered, versioned model builders (`spacy-elmo.*.vN`). Never change a published signature:
add a `.v2` next to it."""

from __future__ import annotations

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Maxout, Model, chain, concatenate, with_array
from thinc.types import Floats2d

from .layers import ElmoLayersModel, elmo_layers
from .listener import ElmoListener
from .mix import elmo_mix

Tok2VecModel = Model[list[Doc], list[Floats2d]]


@registry.architectures("spacy-elmo.ElmoModel.v1")
def build_elmo_model_v1(*, max_length: int = 256, max_batch_tokens: int = 4096) -> ElmoLayersModel:
    """The `elmo` component's model: Docs -> (L + 1, n_tokens, 2P) per doc.

    The biLM's size comes from the weights loaded at `initialize`, not from this config.

    max_length (int): longest token sequence the biLM reads at once. Docs with sentence boundaries
        are read sentence by sentence, others in windows; longer sentences are cut into windows.
        The LSTM states start from zero at each sentence or window.
    max_batch_tokens (int): padded tokens (rows x longest row) per biLM batch; bounds memory.
    RETURNS (Model[List[Doc], List[Floats3d]]): the model.
    """
    return elmo_layers(max_length=max_length, max_batch_tokens=max_batch_tokens)


def _with_embeddings(elmo: Tok2VecModel, embed: Tok2VecModel | None) -> Tok2VecModel:
    """The paper's `[x_k; ELMo_k]`: spaCy's own embeddings next to the ELMo mix, when given."""
    return elmo if embed is None else concatenate(embed, elmo)


@registry.architectures("spacy-elmo.ElmoListener.v1")
def build_elmo_listener_v1(
    *,
    width: int | None = None,
    upstream: str = "elmo",
    dropout: float = 0.0,
    l2_lambda: float = 0.0,
    embed: Tok2VecModel | None = None,
) -> Tok2VecModel:
    """Listen to an `elmo` component and mix its layers with this component's own weights.

    The mix is `bilm.ScalarMix` (torch) behind a Thinc shim.

    width (Optional[int]): project the 2P-wide mix to this width; None keeps 2P.
    upstream (str): name of the `elmo` component, or "*" for any `elmo`-type component.
    dropout (float): dropout on the mixed vectors in training; spaCy's [training] dropout leaves it as set.
    l2_lambda (float): the paper's L2 penalty on the mix's layer weights.
    embed (Optional[Model]): e.g. `spacy.MultiHashEmbed.v2`, concatenated before the ELMo vectors.
    RETURNS (Model[List[Doc], List[Floats2d]]): the tok2vec for a downstream component.
    """
    mix = elmo_mix(width=width, dropout=dropout, l2_lambda=l2_lambda)
    return _with_embeddings(ElmoListener(upstream, mix), embed)


@registry.architectures("spacy-elmo.ElmoEmbed.v1")
def build_elmo_embed_v1(
    *,
    width: int,
    elmo: Tok2VecModel,
    embed: Tok2VecModel | None = None,
    maxout_pieces: int = 3,
) -> Tok2VecModel:
    """ELMo as one more input of a spaCy tok2vec's embedding layer: `[embed; ELMo]` -> maxout.

    The concatenation goes through a layer-normalised maxout to `width`, as spaCy's
    `MultiHashEmbed` does with its tables. As the `embed` of `spacy.Tok2Vec.v2`, it leaves the
    task model (e.g. `spacy.MaxoutWindowEncoder.v2` and the parser above it) exactly the
    baseline's and only enriches its input, which is how the paper adds ELMo to a task model.

    width (int): output width, the encoder's width.
    elmo (Model): a `spacy-elmo.ElmoListener.v1` (its `embed` left unset) or `spacy-elmo.Tok2VecElmo.v1`.
    embed (Optional[Model]): spaCy's own embeddings, e.g. `spacy.MultiHashEmbed.v2`; None: ELMo alone.
    maxout_pieces (int): pieces per maxout unit.
    RETURNS (Model[List[Doc], List[Floats2d]]): the embedding layer, width `width`.
    """
    model = chain(_with_embeddings(elmo, embed), with_array(Maxout(width, nP=maxout_pieces, normalize=True)))
    model.set_dim("nO", width)
    return model


@registry.architectures("spacy-elmo.Tok2VecElmo.v1")
def build_tok2vec_elmo_v1(
    *,
    elmo: ElmoLayersModel,
    width: int | None = None,
    dropout: float = 0.0,
    l2_lambda: float = 0.0,
    embed: Tok2VecModel | None = None,
    frozen: bool = True,
) -> Tok2VecModel:
    """A biLM owned by one component (no sharing): `elmo` + the component's own mix.

    `nlp.replace_listeners("elmo", ...)` produces this from a listener, with the weights. Built
    from a config alone, its biLM has no weights until the pipeline is loaded from disk.

    elmo (Model): a `spacy-elmo.ElmoModel.v1`.
    frozen (bool): run the biLM without autograd and never update it.
    Other arguments as in `spacy-elmo.ElmoListener.v1`.
    RETURNS (Model[List[Doc], List[Floats2d]]): the tok2vec.
    """
    mix = elmo_mix(width=width, dropout=dropout, l2_lambda=l2_lambda, input_gradient=not frozen)
    elmo.attrs["frozen"] = frozen
    return _with_embeddings(chain(elmo, mix), embed)
