"""`spacy-elmo info`: describe a biLM (a name, a model directory, AllenNLP files), or a preset's shape."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..bilm.config import PRESETS, BiLMConfig
from ..bilm.errors import ConfigError
from ..bilm.io.file_names import HEAD_FILE, VOCAB_FILE
from ..bilm.precision_modes import PrecisionChoice
from ..bundled import BUNDLED_NAME, bundled_card
from .common import app, reports_errors

if TYPE_CHECKING:  # the biLM (torch) is imported where the command runs: --help answers without it
    from ..bilm import BiLM


def describe(config: BiLMConfig, n_parameters: int) -> list[tuple[str, str]]:
    """Rows of (field, value) that tell a user what a biLM is."""
    clip = lambda value: "none" if value is None else f"{value:g}"  # noqa: E731
    return [
        ("parameters (no softmax)", f"{n_parameters:,}"),
        ("output", f"{config.n_output_layers} layers x {config.output_dim} dims per token"),
        (
            "LSTM",
            f"{config.n_layers} layers x 2 directions, cell {config.lstm_dim}, "
            f"projection {config.projection_dim}",
        ),
        ("clipping", f"cell {clip(config.cell_clip)}, projection {clip(config.proj_clip)}"),
        ("residual connections", "yes" if config.use_skip_connections else "no"),
        ("char CNN", f"{config.n_filters} filters {list(config.filters)}, {config.activation}"),
        ("highway layers", str(config.n_highway)),
        (
            "char embedding",
            f"{config.char_embedding_dim} dims, {config.max_characters_per_token} chars per token",
        ),
        (
            "characters",
            f"the model's lexicon ({config.char_embedding_rows:,} rows)"
            if config.uses_lexicon
            else "UTF-8 bytes",
        ),
        (
            "word embedding",
            f"{config.word_dim} dims x {config.n_words:,} words, before the projection"
            if config.word_dim
            else "none",
        ),
    ]


def softmax_head_row(model_dir: Path) -> tuple[str, str]:
    """Whether a model directory carries the softmax head that fine-tune and evaluate continue from."""
    from ..bilm.io.model_dir import has_softmax_head

    if has_softmax_head(model_dir):
        n_words = len((model_dir / VOCAB_FILE).read_text(encoding="utf8").splitlines())
        return "softmax head", f"{n_words:,}-word vocabulary ({HEAD_FILE}): fine-tune and evaluate use it"
    return "softmax head", "none (embedding only; fine-tune starts a new head over its text's vocabulary)"


def echo_card(card: dict[str, Any], card_path: Path) -> None:
    """The model card's facts, one per line, then where the whole card is: the training history
    (every stage's command) is there, not here."""
    typer.secho("Model card", bold=True)
    optimizers = [stage["optimizer"] for stage in card["stages"]]
    rows = [
        ("trained on", card["corpus"]),
        ("licences", card["licences"]),
        ("tokens seen", f"{card['tokens_seen']:,} ({card['steps']:,} steps)"),
        ("training time", f"{card['hours']:.2f} hours on {card['hardware']}"),
        (
            "held-out perplexity",
            f"dev {card['dev_perplexity']:.1f} ({card['dev_tokens']:,} tokens), "
            f"test {card['test_perplexity']:.1f} ({card['test_tokens']:,} tokens), stateful; "
            f"one sentence at a time from zero states, as the elmo component runs: "
            f"dev {card['dev_sentence_perplexity']:.1f}, test {card['test_sentence_perplexity']:.1f}",
        ),
        (
            "training",
            f"{len(card['stages'])} stages ({' then '.join(dict.fromkeys(optimizers))}), each from the "
            "weights the one before ended with; their commands are in the card",
        ),
        ("card", str(card_path)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        typer.echo(f"  {name:<{width}}  {value}")


def echo_precision_plan(bilm: BiLM, precision: str) -> None:
    """Each matrix product's mode at `precision` on this machine, with "auto"'s measured times."""
    import torch

    plan = bilm.set_precision(precision).precision_plan
    typer.secho(
        f"Precision {precision!r} on this machine ({torch.get_num_threads()} threads): product, mode"
        + (", best time per call against fp32's" if plan.timings else ""),
        bold=True,
    )
    for line in plan.lines():
        typer.echo(f"  {line}")


@app.command()
@reports_errors
def info(
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help=f"A model directory, an AllenNLP options.json, {BUNDLED_NAME} (the bundled English biLM, "
            "the default), or a published name (spacy-elmo download --list; downloaded on first use).",
        ),
    ] = BUNDLED_NAME,
    weights: Annotated[
        Path | None, typer.Option("--weights", "-w", help="AllenNLP HDF5 weights for an options.json.")
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            help=f"Describe a preset's shape (random weights) instead: {', '.join(PRESETS)}.",
            show_default=False,
        ),
    ] = None,
    precision: Annotated[
        PrecisionChoice | None,
        typer.Option(
            help="Also show how each matrix product would run at this precision; auto times them on "
            "this machine (seconds, once: then cached) and shows each one's best time against fp32."
        ),
    ] = None,
) -> None:
    """Describe a biLM; with weights, load and check them and embed a test sentence."""
    from ..bilm import BiLM
    from ..hub import locate_bilm

    located = locate_bilm(model, weights) if preset is None else None  # a preset leaves MODEL unread
    path = Path(model) if located is None else located.path
    if located is None:
        if preset not in PRESETS:
            raise ConfigError(f"--preset {preset!r} is not a preset: choose one of {', '.join(PRESETS)}.")
        title, bilm = f"preset {preset!r} (random weights)", BiLM(PRESETS[preset])
    elif located.name.kind == "bundled":
        title, bilm = f"{BUNDLED_NAME} (bundled with spacy-elmo, {path})", located.load()
    elif located.name.kind == "published":
        title, bilm = f"{model} (published: {located.name.published.language}; {path})", located.load()
    elif path.is_dir() or weights is not None:
        title, bilm = f"{path}{f' + {weights}' if weights else ''}", located.load()
    elif path.is_file():
        title, bilm = str(path), BiLM(BiLMConfig.from_options_file(path))
    else:
        raise ConfigError(
            f"{model} does not exist, and it is not {BUNDLED_NAME} or a published name (spacy-elmo "
            "download --list): give a model directory, an AllenNLP options file, or one of those names "
            f"(--preset NAME describes a preset's shape: {', '.join(PRESETS)})."
        )
    n_parameters = sum(parameter.numel() for parameter in bilm.parameters())
    typer.secho(f"ELMo biLM: {title}", bold=True)
    has_weights = preset is None and (path.is_dir() or weights is not None)
    rows = describe(bilm.config, n_parameters) + (
        [softmax_head_row(path)] if has_weights and path.is_dir() else []
    )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        typer.echo(f"  {name:<{width}}  {value}")
    if has_weights:
        sentence = "The bank raised rates near the river bank .".split()
        layers = bilm.embed_sentences([sentence])[0]
        typer.echo(
            f"  {'test sentence':<{width}}  {len(sentence)} tokens -> layers {tuple(layers.shape)}, "
            f"top-layer norm of 'bank' {float((layers[-1, 1] ** 2).sum() ** 0.5):.4f}"
        )
    if precision is not None:
        echo_precision_plan(bilm, precision)
    if located is not None and located.name.kind == "bundled":
        echo_card(bundled_card(), path / "MODEL_CARD.md")
