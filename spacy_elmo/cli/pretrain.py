"""`spacy-elmo pretrain | fine-tune | export-checkpoint | evaluate`: train a biLM on raw text, take
the model of any checkpoint, measure its perplexity."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..bilm.io.atomic import atomic_write_text
from ..bundled import BUNDLED_NAME
from .common import Force, app, check_output, refuse_output_over_inputs, reports_errors
from .overrides import parse_overrides


class DocumentUnit(StrEnum):
    line = "line"
    file = "file"


OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}
GPU_HELP = "GPU to train on (-1 = CPU). Under torchrun each process uses its LOCAL_RANK's GPU."


@app.command(context_settings=OVERRIDES)
@reports_errors
def pretrain(
    ctx: typer.Context,
    config_path: Annotated[Path, typer.Argument(metavar="CONFIG_PATH", help="Pretraining config (.cfg).")],
    output_dir: Annotated[
        Path, typer.Argument(metavar="OUTPUT_DIR", help="Where the model, checkpoints and metrics go.")
    ],
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run saved in OUTPUT_DIR.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a run or model in OUTPUT_DIR.")] = False,
    gpu_id: Annotated[int, typer.Option("--gpu-id", help=GPU_HELP)] = -1,
) -> None:
    """Pretrain a biLM from scratch. Extra options override the config: --training.max_steps 100."""
    from ..training import load_pretrain_config
    from ..training import pretrain as run_pretraining

    config = load_pretrain_config(config_path, parse_overrides(ctx.args))
    run_pretraining(config, output_dir, resume=resume, force=force, gpu_id=gpu_id)


@app.command("fine-tune", context_settings=OVERRIDES)
@reports_errors
def fine_tune(
    ctx: typer.Context,
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL",
            help=f"A spacy-elmo model directory, {BUNDLED_NAME} (the bundled biLM), a published name "
            "(spacy-elmo download --list) or an AllenNLP options.json.",
        ),
    ],
    config_path: Annotated[
        Path,
        typer.Argument(
            metavar="CONFIG_PATH",
            help="Pretraining config: its model section is ignored (the model keeps its shape).",
        ),
    ],
    output_dir: Annotated[
        Path, typer.Argument(metavar="OUTPUT_DIR", help="Where the fine-tuned model goes.")
    ],
    weights: Annotated[
        Path | None, typer.Option("--weights", help="AllenNLP HDF5 weights, when MODEL is an options.json.")
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run saved in OUTPUT_DIR.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a run or model in OUTPUT_DIR.")] = False,
    gpu_id: Annotated[int, typer.Option("--gpu-id", help=GPU_HELP)] = -1,
) -> None:
    """Continue training a biLM on domain text. AllenNLP imports start a new softmax head."""
    from ..hub import locate_bilm
    from ..training import load_initial_model, load_pretrain_config
    from ..training import pretrain as run_pretraining

    config = load_pretrain_config(config_path, parse_overrides(ctx.args))
    located = locate_bilm(model, weights)
    refuse_output_over_inputs(output_dir, [located.path] if weights is None else [located.path, weights])
    initial = load_initial_model(located.load(), located.path if located.path.is_dir() else None)
    run_pretraining(config, output_dir, resume=resume, force=force, gpu_id=gpu_id, initial=initial)


@app.command("export-checkpoint")
@reports_errors
def export_checkpoint(
    run_dir: Annotated[
        Path, typer.Argument(metavar="RUN_DIR", help="The output directory of `pretrain` or `fine-tune`.")
    ],
    output_dir: Annotated[Path, typer.Argument(metavar="OUTPUT_DIR", help="Where the model directory goes.")],
    checkpoint: Annotated[
        Path | None,
        typer.Option(help="A checkpoint folder (step-NNNNNNNN) to export instead of the run's latest."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a model in OUTPUT_DIR.")] = False,
) -> None:
    """The model directory of a checkpoint, while the run goes on or after it was stopped: the files
    a finished run writes (biLM, softmax head, vocabulary, AllenNLP export, plot)."""
    from ..training.run_dir import export_checkpoint as export

    step = export(run_dir, output_dir, checkpoint=checkpoint, force=force)
    typer.echo(
        f"Wrote the model of step {step:,} to {output_dir}. Compare checkpoints by held-out perplexity: "
        f"spacy-elmo evaluate {output_dir} DEV_TEXT"
    )


@app.command()
@reports_errors
def evaluate(
    model_dir: Annotated[
        str,
        typer.Argument(
            metavar="MODEL_DIR",
            help=f"A model directory written by `pretrain`, or {BUNDLED_NAME} (the bundled biLM).",
        ),
    ],
    text: Annotated[
        Path, typer.Argument(metavar="TEXT", help="Held-out text: a file or folder, plain or .gz.")
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the scores as JSON here.")
    ] = None,
    document_per: Annotated[
        DocumentUnit, typer.Option(help="What one document is: a line, or a whole file.")
    ] = DocumentUnit.line,
    lang: Annotated[str, typer.Option(help="spaCy language code of the tokenizer.")] = "en",
    batch_size: Annotated[
        int,
        typer.Option(
            min=1, help="Rows evaluated together (the per-sentence pass: as many rows x unroll steps)."
        ),
    ] = 64,
    unroll_steps: Annotated[
        int, typer.Option(min=1, help="Tokens per row per batch (states carry over).")
    ] = 20,
    force: Force = False,
) -> None:
    """Held-out perplexity (forward, backward, geometric mean): stateful and per sentence."""
    from ..hub import locate_bilm
    from ..training import load_language_model, perplexity, sentence_perplexity
    from ..training.corpus import DocumentReader, SentenceSplitter, corpus_files, read_sentences
    from ..training.errors import CorpusError

    if output is not None:
        check_output(output, force, inputs=[text])
    objective, vocabulary = load_language_model(locate_bilm(model_dir).path)
    reader = DocumentReader(corpus_files(str(text), "evaluation"), document_per.value)
    sentences = read_sentences(reader, SentenceSplitter(lang), max_tokens=0)
    if not sentences:
        raise CorpusError(f"The evaluation text {text} has no tokens (it is empty or only whitespace).")
    scores = perplexity(objective, sentences, vocabulary, batch_size=batch_size, unroll_steps=unroll_steps)
    per_sentence = sentence_perplexity(
        objective, sentences, vocabulary, batch_positions=batch_size * unroll_steps
    )
    scores.update({f"sentence_{name}": value for name, value in per_sentence.items()})
    measures = (
        ("", "stateful over the text, as bilm-tf reports it"),
        ("sentence_", "each sentence alone from zero states, as the elmo component runs"),
    )
    for prefix, how in measures:
        typer.echo(
            f"perplexity {scores[prefix + 'perplexity']:.2f} (forward {scores[prefix + 'forward']:.2f}, "
            f"backward {scores[prefix + 'backward']:.2f}) over {scores[prefix + 'tokens']:,} tokens: {how}"
        )
    if output is not None:
        atomic_write_text(output, json.dumps(scores, indent=2) + "\n")
