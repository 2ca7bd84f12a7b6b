"""What went wrong when an ELMo listener has no biLM to read: one message per mistake.

A listener learns its pipeline only through the `elmo` component that links it, so when no
component linked it, the message is worked out from the pipeline that is running it: the
`Language` found on the call stack (`nlp(...)`, `nlp.pipe`, `nlp.initialize`, `nlp.update`).
This runs only on the way to an error.
"""

from __future__ import annotations

import inspect

from spacy.language import Language
from thinc.api import Model

from .layers import is_elmo_layers


def calling_pipeline() -> Language | None:
    """The innermost `Language` whose method is on the call stack, or None (a component called
    on its own, or a worker process of `nlp.pipe(n_process > 1)`)."""
    frame = inspect.currentframe()
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Language):
            return candidate
        frame = frame.f_back
    return None


def owns(component: object, listener: Model) -> bool:
    """Whether `listener` is a node of the component's model."""
    model = getattr(component, "model", None)
    return isinstance(model, Model) and any(node is listener for node in model.walk())


def missing_upstream_message(listener: Model, upstream_name: str, nlp: Language | None) -> str:
    """Why the listener (listening to `upstream_name`) has no biLM layers, and how to fix it, for
    the pipeline running it."""
    wanted = "any elmo component" if upstream_name == "*" else f"'{upstream_name}'"
    owner = None if nlp is None else next((n for n, c in nlp.components if owns(c, listener)), None)
    if nlp is None or owner is None:
        return (
            f"An ELMo listener (upstream {wanted}) got docs without doc._.elmo and is linked to no "
            "elmo component with weights. Put an initialized 'elmo' component before the listening "
            "component in the pipeline, under the name its listener's upstream gives."
        )
    order = [name for name, _ in nlp.components]
    elmo_names = [
        name for name, component in nlp.components if is_elmo_layers(getattr(component, "model", None))
    ]
    matching = [name for name in elmo_names if upstream_name in ("*", name)]
    config_path = f"[components.{owner}.model]"
    if not elmo_names:
        return (
            f"'{owner}' listens to {wanted}, but the pipeline has no elmo component (its components: "
            f"{', '.join(order)}). If '{owner}' was sourced from another pipeline, bring its biLM "
            f'along: either source that pipeline\'s elmo too (nlp.add_pipe("elmo", source=other_nlp, '
            f"before=\"{owner}\")), or give '{owner}' its own copy of the biLM before sourcing it "
            f'(other_nlp.replace_listeners("elmo", "{owner}", ["model.tok2vec"])). In a new pipeline, '
            f"add 'elmo' before '{owner}'."
        )
    if not matching:
        return (
            f"'{owner}' listens to '{upstream_name}', but no component has that name; the "
            f"pipeline's elmo components are {', '.join(repr(name) for name in elmo_names)} (all its "
            f'components: {", ".join(order)}). Set upstream = "{elmo_names[0]}" (or "*") in the '
            f"ELMo listener's config under {config_path}."
        )
    if all(order.index(name) > order.index(owner) for name in matching):
        return (
            f"'{owner}' listens to {wanted}, which comes after it in the pipeline ({', '.join(order)}). "
            f"Move '{matching[0]}' before '{owner}' in [nlp] pipeline (in code: "
            f'nlp.add_pipe("elmo", before="{owner}")).'
        )
    return (
        f"'{owner}' listens to {wanted} ({', '.join(matching)} in the pipeline {', '.join(order)}), "
        "but is not linked to it or it has no weights yet: run nlp.initialize() after building the "
        "pipeline, or load a trained one with spacy.load()."
    )
