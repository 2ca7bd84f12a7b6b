"""`spacy-elmo convert-ewt`: UD EWT + UNER EWT -> a `.spacy` corpus with parses and entities."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .main import Force, app, check_output, reports_errors


@app.command("convert-ewt")
@reports_errors
def convert_ewt_command(
    conllu: Annotated[Path, typer.Argument(help="UD English EWT .conllu file.")],
    iob2: Annotated[Path, typer.Argument(help="UNER English EWT .iob2 file of the same split.")],
    output: Annotated[Path, typer.Argument(help="The .spacy file to write.")],
    limit: Annotated[int | None, typer.Option(help="Keep only the first N sentences (tests, CI).")] = None,
    force: Force = False,
) -> None:
    """Merge UNER entities onto UD EWT sentences by sent_id and write a spaCy DocBin."""
    check_output(output, force)
    from ..pipeline.corpus import convert_ewt

    report = convert_ewt(conllu, iob2, output, limit=limit)
    typer.echo(
        f"Wrote {output}: {report.n_sentences} sentences, {report.n_with_entities} with entities "
        f"({report.n_entities} entities), {len(report.mismatched)} without (token mismatch or absent)."
    )
