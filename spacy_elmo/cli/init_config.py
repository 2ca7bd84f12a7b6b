"""`spacy-elmo init-config`: a training config for `spacy train`, as `spacy init config` writes one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..bilm.errors import ConfigError
from ..bundled import BUNDLED_NAME
from ..configs import shipped_config
from .common import Force, app, check_output, reports_errors

if TYPE_CHECKING:  # the hub (torch) is imported where the command runs: --help answers without it
    from ..hub import ResolvedName

# (components, ELMo or not) -> the shipped config that trains them
CONFIGS = {
    (("ner",), True): "ner_elmo.cfg",
    (("parser",), True): "parser_elmo.cfg",
    (("ner", "parser"), True): "ner_parser_elmo.cfg",
    (("ner",), False): "ner_cnn.cfg",
    (("parser",), False): "parser_cnn.cfg",
}


def config_name(pipeline: str, cnn: bool) -> str:
    """The shipped config for a `--pipeline` value such as "ner", "parser" or "ner,parser"."""
    components = tuple(sorted(part.strip() for part in pipeline.split(",") if part.strip()))
    name = CONFIGS.get((components, not cnn))
    if name is None:
        choices = sorted({",".join(parts) for parts, elmo in CONFIGS if elmo != cnn})
        kind = "spaCy's CNN alone (--cnn)" if cnn else "ELMo"
        raise ConfigError(f"--pipeline {pipeline!r} with {kind}: choose one of {', '.join(choices)}.")
    return name


def with_settings(text: str, settings: dict[tuple[str, str], Any]) -> str:
    """A config's text with the value of each (section, key) of `settings` replaced where it
    stands, so the shipped config's comments and order stay."""
    import srsly

    lines = text.splitlines(keepends=True)
    section, found = None, set()
    for index, line in enumerate(lines):
        header = re.fullmatch(r"\[(.+)\]\s*", line)
        if header:
            section = header.group(1)
        elif "=" in line and (section, key := line.split("=", 1)[0].strip()) in settings:
            lines[index] = f"{key} = {srsly.json_dumps(settings[section, key])}\n"
            found.add((section, key))
    missing = set(settings) - found
    if missing:
        raise ConfigError(f"The shipped config has no {', '.join(f'{s}.{k}' for s, k in sorted(missing))}.")
    return "".join(lines)


def checked_bilm(bilm: str) -> ResolvedName:
    """`--bilm` read by the one naming rule (`hub.names`): the bundled or a published biLM by name,
    or a path, which must be a model directory, so that `spacy train` does not fail on it later."""
    from ..bilm.io.model_dir import read_model_config
    from ..hub import resolve_name

    resolved = resolve_name(bilm)
    if resolved.kind != "path":
        return resolved
    if not Path(bilm).exists():
        raise ConfigError(
            f"--bilm {bilm}: no such directory, and not a published name (spacy-elmo download --list) "
            f"or {BUNDLED_NAME}."
        )
    try:
        read_model_config(bilm)
    except ConfigError as error:
        raise ConfigError(f"--bilm {bilm}: {error}") from None
    return resolved


@app.command("init-config")
@reports_errors
def init_config(
    output: Annotated[
        Path,
        typer.Argument(metavar="OUTPUT", help="The .cfg file to write, for `python -m spacy train OUTPUT`."),
    ],
    pipeline: Annotated[
        str, typer.Option(help="The components to train: ner, parser, or ner,parser (one biLM feeds both).")
    ] = "ner",
    cnn: Annotated[
        bool, typer.Option("--cnn", help="spaCy's CNN tok2vec without ELMo: the baseline to compare with.")
    ] = False,
    bilm: Annotated[
        str | None,
        typer.Option(
            help="The biLM: a model directory or a published name (its language becomes the config's); "
            "default: the bundled en_elmo_cpu."
        ),
    ] = None,
    force: Force = False,
) -> None:
    """Write a training config: NER, a parser or both, on ELMo (or on spaCy's CNN alone)."""
    from spacy.util import load_config

    check_output(output, force)
    name = config_name(pipeline, cnn)
    config = load_config(shipped_config(name), interpolate=False)
    settings: dict[tuple[str, str], Any] = {}
    language_note = ""
    if bilm is not None:
        if cnn:
            raise ConfigError("--bilm with --cnn: the CNN baseline reads no biLM; leave out one of them.")
        resolved = checked_bilm(bilm)
        settings["paths", "elmo"] = None if resolved.kind == "bundled" else bilm  # null: the loader's default
        if resolved.spacy_lang is not None:
            settings["nlp", "lang"] = resolved.spacy_lang
        else:
            language_note = f" The language is {config['nlp']['lang']!r}: add --nlp.lang CODE for another."
    lang = settings.get(("nlp", "lang"), config["nlp"]["lang"])
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        with_settings(shipped_config(name).read_text(encoding="utf8"), settings), encoding="utf8"
    )
    typer.echo(
        f"Wrote {output} (from {name}, lang = {lang!r}). Train: python -m spacy train "
        f"{output} --paths.train TRAIN.spacy --paths.dev DEV.spacy --output training/{language_note}"
    )
