"""`spacy-elmo download`: fetch a published biLM by name into the cache, or list the names."""

from __future__ import annotations

from typing import Annotated

import typer

from ..hub import PUBLISHED_MODELS, HubError, published_model_dir
from .main import app, reports_errors


def echo_catalog() -> None:
    """Every published name with its language, size and the URLs of its files (weights first)."""
    width = max(len(name) for name in PUBLISHED_MODELS)
    for model in PUBLISHED_MODELS.values():
        typer.secho(f"{model.name:<{width}}  {model.language}; {model.size}", bold=True)
        for url in reversed(model.urls):
            typer.echo(f"{'':<{width}}  {url}")


@app.command()
@reports_errors
def download(
    name: Annotated[
        str | None,
        typer.Argument(
            help="A published biLM's name, e.g. original, small or efml-de (see --list).",
            show_default=False,
        ),
    ] = None,
    list_names: Annotated[
        bool, typer.Option("--list", help="Print every published name with its size and source, then stop.")
    ] = False,
) -> None:
    """Download a published ELMo biLM (AllenNLP's, or ELMoForManyLangs' in 44 languages) into the
    cache and convert it once.

    Cache: $SPACY_ELMO_CACHE (default: your user cache + spacy-elmo). Own server: $SPACY_ELMO_MIRROR.
    """
    if list_names:
        echo_catalog()
        return
    if name is None:
        raise HubError("give the NAME of a published biLM to download, or --list to see the names.")
    model_dir = published_model_dir(name)
    typer.echo(f"{name} is ready in {model_dir}: train with `--paths.elmo {name}`.")
