"""`nlp.replace_listeners("elmo", ...)` hooks: a listener becomes an inline `Tok2VecElmo`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from spacy.tokens import Doc
from thinc.api import Model, chain
from thinc.types import Floats2d

from .errors import ElmoPipelineError
from .listener import ElmoListener

# Each listener version is replaced by the inline model of the same version (the same mix).
INLINE_ARCHITECTURES = {"spacy-elmo.ElmoListener.v1": "spacy-elmo.Tok2VecElmo.v1"}


def replace_listener(
    elmo_copy: Model, listener: ElmoListener, _component: Any
) -> Model[list[Doc], list[Floats2d]]:
    """The model that takes the listener's place: a copy of the biLM model chained with a copy of
    the listener's own mix, so predictions stay the same without the `elmo` component."""
    mix = listener.mix.copy()
    mix.attrs["input_gradient"] = not elmo_copy.attrs["frozen"]
    return chain(elmo_copy, mix)


def replace_listener_cfg(
    elmo_cfg: dict[str, Any], listener_cfg: dict[str, Any], *, frozen: bool
) -> dict[str, Any]:
    """The config that matches `replace_listener`: `spacy-elmo.Tok2VecElmo` of the listener's
    version with the listener's settings (minus `upstream`) and the component's `frozen` flag.

    spaCy passes the component's whole `model.tok2vec` config, which holds the listener's config
    deeper down when the listener is nested (e.g. in `spacy-elmo.ElmoEmbed.v1`).
    """
    listener = _listener_config(listener_cfg)
    settings = {key: value for key, value in listener.items() if key not in ("@architectures", "upstream")}
    return {
        "@architectures": INLINE_ARCHITECTURES[listener["@architectures"]],
        "elmo": dict(elmo_cfg),
        **settings,
        "frozen": frozen,
    }


def _listener_config(tok2vec_cfg: dict[str, Any]) -> dict[str, Any]:
    """The one `spacy-elmo.ElmoListener` config in `tok2vec_cfg` (itself or nested)."""
    found = list(_listener_configs(tok2vec_cfg))
    if len(found) != 1:
        raise ElmoPipelineError(
            f"replace_listeners found {len(found)} spacy-elmo.ElmoListener configs in the "
            "component's model.tok2vec config; it can replace exactly one per component. Give each "
            "component a single ELMo listener."
        )
    return found[0]


def _listener_configs(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if config.get("@architectures") in INLINE_ARCHITECTURES:
        yield config
        return
    for value in config.values():
        if isinstance(value, dict):
            yield from _listener_configs(value)
