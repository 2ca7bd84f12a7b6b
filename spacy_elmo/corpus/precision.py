"""One precision plan per run: `auto` is measured once, in the command's process (or read from
its cache), and every worker runs that plan, so the rows of one output are computed alike and
the output says how (the `precision` of its provenance).

A plan travels as JSON: a mode ("fp32", "bf16", "int8") for every product, or, for `auto`,
{product name: [[from_rows, mode], ...]} as `BiLM.precision_plan.modes` holds it.
"""

from __future__ import annotations

from typing import Any

from spacy.language import Language

from ..bilm import BiLM
from ..bilm.auto_precision import PrecisionPlan
from ..pipeline.layers import get_bilm

PlanJSON = str | dict[str, list[list[Any]]]


def elmo_components(nlp: Language) -> list[str]:
    return [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == "elmo"]


def pipeline_bilms(nlp: Language) -> list[BiLM]:
    bilms = [get_bilm(nlp.get_pipe(name).model) for name in elmo_components(nlp)]
    return [bilm for bilm in bilms if bilm is not None]


def plan_json(bilm: BiLM) -> PlanJSON:
    """The plan a biLM runs: its mode, or every product's row buckets where `auto` chose them."""
    if bilm.precision != "auto":
        return bilm.precision
    return {name: [[rows, mode] for rows, mode in modes] for name, modes in bilm.precision_plan.modes.items()}


def pipeline_plan(nlp: Language) -> PlanJSON:
    """The plan a pipeline's biLMs run (the first one's; a pipeline has one): what an output records."""
    plans = [plan_json(bilm) for bilm in pipeline_bilms(nlp)]
    return plans[0] if plans else "fp32"


def apply_plan(nlp: Language, plan: PlanJSON) -> None:
    """Run every biLM of the pipeline by `plan` (from `plan_json`), measuring nothing."""
    for bilm in pipeline_bilms(nlp):
        if isinstance(plan, str):
            bilm.set_precision(plan)
        else:
            modes = {
                name: tuple((int(rows), mode) for rows, mode in buckets) for name, buckets in plan.items()
            }
            bilm.set_precision(PrecisionPlan(modes))


def configured_precisions(config: Any) -> dict[str, str]:
    """The `precision` of every elmo component in a pipeline's config, by component name."""
    components = config.get("components", {})
    return {
        name: str(settings.get("precision", "fp32"))
        for name, settings in components.items()
        if settings.get("factory") == "elmo"
    }
