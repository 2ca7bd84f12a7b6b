"""`nlp.replace_listeners("elmo", ...)` hooks: a listener becomes an inline `Tok2VecElmo`."""

from __future__ import annotations

from typing import Any

from spacy.tokens import Doc
from thinc.api import Model, chain
from thinc.types import Floats2d

from .listener import ElmoListener


def replace_listener(
    elmo_copy: Model, listener: ElmoListener, _component: Any
) -> Model[list[Doc], list[Floats2d]]:
    """The model that takes the listener's place: a copy of the biLM model chained with a copy of
    the listener's own mix, so predictions stay the same without the `elmo` component."""
    return chain(elmo_copy, listener.mix.copy())


def replace_listener_cfg(
    elmo_cfg: dict[str, Any], listener_cfg: dict[str, Any], *, frozen: bool
) -> dict[str, Any]:
    """The config that matches `replace_listener`: `spacy-elmo.Tok2VecElmo.v1` with the listener's
    settings (minus `upstream`) and the component's `frozen` flag."""
    settings = {
        key: value for key, value in listener_cfg.items() if key not in ("@architectures", "upstream")
    }
    return {
        "@architectures": "spacy-elmo.Tok2VecElmo.v1",
        "elmo": dict(elmo_cfg),
        **settings,
        "frozen": frozen,
    }
