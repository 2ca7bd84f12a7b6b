"""`spacy-elmo convert` / `export`: AllenNLP HDF5 weights to our model directory and back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..bilm import BiLM
from ..bilm.io.allennlp import ALLENNLP_OPTIONS_FILE, ALLENNLP_WEIGHTS_FILE
from ..bilm.io.model_dir import CONFIG_FILE, WEIGHTS_FILE
from .main import Force, app, check_output, reports_errors


@app.command()
@reports_errors
def convert(
    options: Annotated[Path, typer.Argument(help="AllenNLP options.json.")],
    weights: Annotated[Path, typer.Argument(help="AllenNLP HDF5 weight file.")],
    output_dir: Annotated[Path, typer.Argument(help=f"Where to write {CONFIG_FILE} + {WEIGHTS_FILE}.")],
    force: Force = False,
) -> None:
    """Convert AllenNLP options + HDF5 weights into a spacy-elmo model directory."""
    check_output(output_dir, force)
    BiLM.from_allennlp(options, weights).save(output_dir)
    typer.echo(f"Wrote {output_dir} ({CONFIG_FILE}, {WEIGHTS_FILE}).")


@app.command()
@reports_errors
def export(
    model_dir: Annotated[Path, typer.Argument(help="A spacy-elmo model directory.")],
    output_dir: Annotated[
        Path, typer.Argument(help=f"Where to write {ALLENNLP_OPTIONS_FILE} + {ALLENNLP_WEIGHTS_FILE}.")
    ],
    force: Force = False,
) -> None:
    """Export a spacy-elmo model as AllenNLP/bilm-tf options.json + weights.hdf5."""
    check_output(output_dir, force)
    options_file, weights_file = output_dir / ALLENNLP_OPTIONS_FILE, output_dir / ALLENNLP_WEIGHTS_FILE
    BiLM.load(model_dir).to_allennlp(options_file, weights_file)
    typer.echo(f"Wrote {options_file} and {weights_file}.")
