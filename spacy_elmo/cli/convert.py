"""`spacy-elmo convert` / `export`: AllenNLP HDF5 weights to our model directory and back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..bilm import BiLM
from .main import Force, app, check_output, reports_errors


@app.command()
@reports_errors
def convert(
    options: Annotated[Path, typer.Argument(help="AllenNLP options.json.")],
    weights: Annotated[Path, typer.Argument(help="AllenNLP HDF5 weight file.")],
    output_dir: Annotated[Path, typer.Argument(help="Where to write config.json + model.safetensors.")],
    force: Force = False,
) -> None:
    """Convert AllenNLP options + HDF5 weights into a spacy-elmo model directory."""
    check_output(output_dir, force)
    BiLM.from_allennlp(options, weights).save(output_dir)
    typer.echo(f"Wrote {output_dir} (config.json, model.safetensors).")


@app.command()
@reports_errors
def export(
    model_dir: Annotated[Path, typer.Argument(help="A spacy-elmo model directory.")],
    output_dir: Annotated[Path, typer.Argument(help="Where to write options.json + weights.hdf5.")],
    force: Force = False,
) -> None:
    """Export a spacy-elmo model as AllenNLP/bilm-tf options.json + weights.hdf5."""
    check_output(output_dir, force)
    BiLM.load(model_dir).to_allennlp(output_dir / "options.json", output_dir / "weights.hdf5")
    typer.echo(f"Wrote {output_dir / 'options.json'} and {output_dir / 'weights.hdf5'}.")
