"""`spacy-elmo download`: fetch a published biLM by name into the cache, or list the names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from .common import app, reports_errors

if TYPE_CHECKING:  # the hub (torch) is imported where the command runs: --help answers without it
    from ..hub import PublishedModel


def spacy_language(model: PublishedModel) -> str:
    """The spaCy language a model goes with, and the route where spaCy has no class for it."""
    from ..hub.catalog import MULTI_LANGUAGE

    if model.spacy_lang == MULTI_LANGUAGE:
        return (
            f"spaCy: {MULTI_LANGUAGE} (spaCy has no class for this language: its multi-language "
            "tokenizer; or --nlp.lang CODE of a related language)"
        )
    return f"spaCy: {model.spacy_lang}"


def echo_catalog(sources: bool) -> None:
    """Every published name with its language, size and spaCy language, marked where the cache
    holds it; with `sources` the URLs of its files (weights first) and their source. Then the
    models a public page names that cannot be loaded, and why."""
    from ..hub import PUBLISHED_MODELS, UNSUPPORTED_MODELS
    from ..hub.install import cached_model_dir

    width = max(len(name) for name in (*PUBLISHED_MODELS, *UNSUPPORTED_MODELS))
    for model in PUBLISHED_MODELS.values():
        cached = "  [cached]" if cached_model_dir(model.name) is not None else ""
        line = f"{model.name:<{width}}  {model.language}; {model.size}; {spacy_language(model)}{cached}"
        typer.secho(line, bold=sources)
        if sources:
            for url in reversed(model.urls):
                typer.echo(f"{'':<{width}}  {url}")
            typer.echo(f"{'':<{width}}  source: {model.source}")
    typer.secho("\nNot supported: named by a public page, but spacy-elmo cannot load them", bold=True)
    for unsupported in UNSUPPORTED_MODELS.values():
        typer.secho(f"{unsupported.name:<{width}}  {unsupported.url}", bold=True)
        typer.echo(f"{'':<{width}}  why: {unsupported.reason}")
        typer.echo(f"{'':<{width}}  source: {unsupported.source}")
    if not sources:
        typer.echo("\n--list --sources adds each model's file URLs and where they are published.")


@app.command()
@reports_errors
def download(
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME",
            help="A published biLM's name, e.g. original, small or efml-de (see --list).",
            show_default=False,
        ),
    ] = None,
    list_names: Annotated[
        bool,
        typer.Option(
            "--list", help="Print every published name with its size, marking those in the cache, then stop."
        ),
    ] = False,
    sources: Annotated[
        bool, typer.Option("--sources", help="With --list: each model's file URLs and their source too.")
    ] = False,
) -> None:
    """Download a published ELMo biLM (AllenNLP's and its contributors', or ELMoForManyLangs' in 44
    languages) into the cache and convert it once. Processes that share the cache wait for each other.

    Cache: $SPACY_ELMO_CACHE (default: your user cache + spacy-elmo). Own server: $SPACY_ELMO_MIRROR.
    """
    from ..hub import PUBLISHED_MODELS, HubError, published_model_dir

    if list_names:
        echo_catalog(sources)
        return
    if name is None:
        raise HubError("give the NAME of a published biLM to download, or --list to see the names.")
    model_dir = published_model_dir(name)
    lang = PUBLISHED_MODELS[name].spacy_lang
    typer.echo(
        f"{name} is ready in {model_dir}: `spacy-elmo init-config config.cfg --bilm {name}` writes a "
        f"config for it (lang = {lang!r}), or train with `--paths.elmo {name} --nlp.lang {lang}`."
    )
