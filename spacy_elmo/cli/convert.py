"""`spacy-elmo convert` / `export`: AllenNLP or ELMoForManyLangs files to our model directory, and back
to AllenNLP's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..bilm.errors import ConfigError
from ..bilm.io.file_names import (
    ALLENNLP_OPTIONS_FILE,
    ALLENNLP_WEIGHTS_FILE,
    CONFIG_FILE,
    LEXICON_FILE,
    WEIGHTS_FILE,
)
from .common import Force, app, check_output, reports_errors

if TYPE_CHECKING:  # the biLM (torch) is imported where a command runs: --help answers without it
    from ..bilm import BiLM


def read_source_dir(source: Path) -> BiLM:
    """The biLM of a directory, told apart by what it holds: an ELMoForManyLangs model
    (config.json, char.dic, token_embedder.pkl, encoder.pkl) or AllenNLP's pair (one options
    .json and one .hdf5 file)."""
    from ..bilm import BiLM
    from ..bilm.io.elmoformanylangs import SOURCE_FILES, is_elmoformanylangs_dir

    if is_elmoformanylangs_dir(source):
        return BiLM.from_elmoformanylangs(source)
    options, weights = sorted(source.glob("*.json")), sorted(source.glob("*.hdf5"))
    if len(options) == 1 and len(weights) == 1:
        return BiLM.from_allennlp(options[0], weights[0])
    if (source / WEIGHTS_FILE).is_file():
        raise ConfigError(f"{source} is a spacy-elmo model directory already: use it as it is.")
    raise ConfigError(
        f"{source} holds neither an ELMoForManyLangs model ({', '.join(SOURCE_FILES)}) nor AllenNLP's "
        f"files (one options .json and one weights .hdf5; found {len(options)} and {len(weights)}). "
        "For AllenNLP files elsewhere give both: spacy-elmo convert OPTIONS WEIGHTS OUTPUT_DIR."
    )


@app.command()
@reports_errors
def convert(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="SOURCE",
            help="AllenNLP options.json; or a directory: an ELMoForManyLangs model, or AllenNLP's "
            "options .json + weights .hdf5.",
            show_default=False,
        ),
    ],
    weights_or_output: Annotated[
        Path,
        typer.Argument(
            metavar="WEIGHTS_OR_OUTPUT",
            help="After an options file, its HDF5 weights; after a directory, the output directory.",
            show_default=False,
        ),
    ],
    output_dir: Annotated[
        Path | None,
        typer.Argument(
            metavar="OUTPUT_DIR",
            help=f"Where to write {CONFIG_FILE} + {WEIGHTS_FILE} (+ {LEXICON_FILE}), after OPTIONS WEIGHTS.",
            show_default=False,
        ),
    ] = None,
    force: Force = False,
) -> None:
    """Convert AllenNLP options + HDF5 weights, or an ELMoForManyLangs model directory, into a
    spacy-elmo model directory.

    spacy-elmo convert OPTIONS WEIGHTS OUTPUT_DIR, or spacy-elmo convert MODEL_DIR OUTPUT_DIR.
    """
    if source.is_dir():
        if output_dir is not None:
            raise ConfigError(
                f"{source} is a directory: give it and the output directory only "
                "(spacy-elmo convert MODEL_DIR OUTPUT_DIR)."
            )
        output_dir = weights_or_output
        check_output(output_dir, force, directory=True, inputs=[source])
        bilm = read_source_dir(source)
    else:
        if output_dir is None:
            raise ConfigError(
                f"{source} is not a directory: give the options file, the weights and the output "
                "directory (spacy-elmo convert OPTIONS WEIGHTS OUTPUT_DIR)."
            )
        check_output(output_dir, force, directory=True, inputs=[source, weights_or_output])
        from ..bilm import BiLM

        bilm = BiLM.from_allennlp(source, weights_or_output)
    bilm.save(output_dir)
    written = [CONFIG_FILE, WEIGHTS_FILE] + ([LEXICON_FILE] if bilm.lexicon is not None else [])
    typer.echo(f"Wrote {output_dir} ({', '.join(written)}).")


@app.command()
@reports_errors
def export(
    model_dir: Annotated[Path, typer.Argument(metavar="MODEL_DIR", help="A spacy-elmo model directory.")],
    output_dir: Annotated[
        Path,
        typer.Argument(
            metavar="OUTPUT_DIR", help=f"Where to write {ALLENNLP_OPTIONS_FILE} + {ALLENNLP_WEIGHTS_FILE}."
        ),
    ],
    force: Force = False,
) -> None:
    """Export a spacy-elmo model as AllenNLP/bilm-tf options.json + weights.hdf5."""
    from ..bilm import BiLM

    check_output(output_dir, force, directory=True, inputs=[model_dir])
    options_file, weights_file = output_dir / ALLENNLP_OPTIONS_FILE, output_dir / ALLENNLP_WEIGHTS_FILE
    BiLM.load(model_dir).to_allennlp(options_file, weights_file)
    typer.echo(f"Wrote {options_file} and {weights_file}.")
