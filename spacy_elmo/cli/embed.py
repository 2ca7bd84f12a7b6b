"""`spacy-elmo embed`: contextual vectors of a file of sentences into HDF5 (AllenNLP's old `elmo`
command's layout, with the rows numbered as every command numbers them), or with `--engine ray`
of a corpus into Parquet."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import h5py
import numpy as np
import typer
from tqdm import tqdm

from ..annotation import Annotator
from ..annotation.rows import LayerChoice, select_layers
from ..bilm.errors import ConfigError, InputError
from ..bilm.io.atomic import atomic_path
from ..bilm.precision import PrecisionChoice
from ..corpus.model_source import bilm_source
from ..corpus.outputs import claimed_output
from ..corpus.provenance import PROVENANCE_KEY, provenance
from ..corpus.reading import read_blocks
from ..corpus.sources import TEXT, Corpus, find_corpus
from ..hub.loading import load_bilm
from ..scale.precision import PlanJSON, pipeline_plan, plan_json
from .common import Force, app, check_output, reports_errors
from .engines import (
    AddressOption,
    Engine,
    EngineOption,
    InputFormatOption,
    LayersOption,
    ResumeOption,
    WorkersOption,
    check_engine_options,
    run_on_ray,
)

LOCAL_LAYERS: tuple[LayerChoice, ...] = ("all", "top", "average")
LineEmbedder = Callable[[list[str], list[Any]], list[np.ndarray]]


def stateless_embedder(folder: Path, layers: LayerChoice, precision: str) -> tuple[LineEmbedder, PlanJSON]:
    """Lines through the `elmo` component, as `annotate` and `--engine ray` embed them: a line
    longer than the component's `max_length` (256 tokens) is embedded in windows of that length,
    so its memory stays bounded. Returns the embedder and the precision plan it runs."""
    annotator = Annotator.from_model(folder, layers=layers, precision=precision)

    def embed(texts: list[str], ids: list[Any]) -> list[np.ndarray]:
        return annotator.annotate("text", texts, ids)["vectors"]

    return embed, pipeline_plan(annotator.nlp)


def stateful_embedder(
    folder: Path, layers: LayerChoice, precision: str, batch_size: int
) -> tuple[LineEmbedder, PlanJSON]:
    """Lines straight through a biLM that carries its LSTM states from one batch to the next
    (AllenNLP's legacy mode); a blank line gets no vectors and leaves the states as they are.
    Returns the embedder and the precision plan it runs."""
    bilm = load_bilm(folder, stateful=True).set_precision(precision)
    empty = select_layers(
        np.zeros((bilm.config.n_output_layers, 0, bilm.config.output_dim), np.float32), layers
    )

    def embed(texts: list[str], ids: list[Any]) -> list[np.ndarray]:
        sentences = [text.split() for text in texts]
        computed = iter(bilm.embed_sentences([words for words in sentences if words], batch_size=batch_size))
        return [select_layers(next(computed), layers) if words else empty for words in sentences]

    return embed, plan_json(bilm)


def embed_file(
    embed: LineEmbedder, corpus: Corpus, output_file: Path, batch_size: int, provenance: dict[str, Any]
) -> int:
    """Write one dataset per line (its key: the line number, from 1; a blank line gets no vectors),
    `sentence_to_index`, and the provenance as the file's attribute `spacy_elmo`, reading the
    file once; return the number of lines."""
    sentence_to_index: dict[str, str] = {}
    n_written = 0
    with atomic_path(output_file) as temporary, h5py.File(temporary, "w") as handle:
        with tqdm(
            total=corpus.total_bytes, unit="B", unit_scale=True, desc="embedding", disable=None
        ) as progress:
            for block in read_blocks(corpus.files[0], batch_size, name_ids=False):
                ids, texts = block.table.column("id").to_pylist(), block.table.column("text").to_pylist()
                for row_id, text, vectors in zip(ids, texts, embed(texts, ids)):
                    handle.create_dataset(str(row_id), data=vectors)
                    sentence_to_index.setdefault(" ".join(text.split()), str(row_id))
                n_written += len(ids)
                progress.update(block.end_byte - block.start_byte)
        if n_written == 0:
            raise InputError(
                f"Input file {corpus.location} is empty: give one whitespace-tokenised sentence per line."
            )
        handle.create_dataset("sentence_to_index", data=[json.dumps(sentence_to_index)])
        handle.attrs[PROVENANCE_KEY] = json.dumps(provenance)
    return n_written


@app.command()
@reports_errors
def embed(
    model: Annotated[
        str,
        typer.Argument(
            help="A model directory, en_elmo_cpu, a published name (spacy-elmo download --list), "
            "or an AllenNLP options.json with --weights."
        ),
    ],
    input_path: Annotated[
        str,
        typer.Argument(
            metavar="INPUT",
            help="UTF-8 text, one whitespace-tokenised sentence per line (its id the line number from 1; "
            "a blank line is a row without tokens); with --engine ray also JSON lines (id and text or "
            "tokens) or Parquet, a folder of files, a glob or a URI.",
        ),
    ],
    output: Annotated[
        str, typer.Argument(help="HDF5 file to write; with --engine ray, a Parquet folder (or URI).")
    ],
    force: Force = False,
    weights: Annotated[Path | None, typer.Option("--weights", "-w", help="AllenNLP HDF5 weights.")] = None,
    layers: LayersOption = "average",
    batch_size: Annotated[int, typer.Option(min=1, help="Sentences per batch.")] = 64,
    stateful: Annotated[
        bool, typer.Option(help="Carry LSTM states across batches (legacy AllenNLP).")
    ] = False,
    precision: Annotated[
        PrecisionChoice,
        typer.Option(
            help="How the matrix products run: fp32 (exact), bf16, int8, or auto (each product in the "
            "mode timed fastest on this machine, fp32 where none is faster; `spacy-elmo info MODEL "
            "--precision auto` shows the plan; with --engine ray measured once, for every worker). "
            "The reduced ones deviate slightly."
        ),
    ] = "fp32",
    engine: EngineOption = Engine.local,
    workers: WorkersOption = None,
    address: AddressOption = None,
    resume: ResumeOption = False,
    input_format: InputFormatOption = None,
) -> None:
    """Embed every line of a text file into HDF5: dataset "N" holds line N's vectors (lines from 1;
    a blank line gets no vectors), as AllenNLP's `elmo` did but for its numbering from 0. With
    --engine ray: every row of a corpus, on a Ray cluster, into Parquet."""
    check_engine_options(engine, workers=workers, address=address, resume=resume)
    if engine is Engine.ray:
        if stateful:
            raise ConfigError(
                "--stateful carries LSTM states from one batch to the next, so it needs one process reading "
                "the lines in order: use --engine local with it."
            )
        options = {"model": model, "weights": weights, "layers": layers, "precision": precision}
        kind = None if input_format is None else input_format.value
        settings = {
            "workers": workers,
            "address": address,
            "resume": resume,
            "force": force,
            "input_format": kind,
        }
        return run_on_ray(input_path, output, batch_size=batch_size, **options, **settings)
    if layers not in LOCAL_LAYERS:
        raise ConfigError(
            f"--layers {layers}: the HDF5 file of --engine local holds all, top or average "
            "(mix and none need a pipeline: annotate)."
        )
    output_file = Path(output)
    corpus = find_corpus(
        input_path, kind=None if input_format is None else input_format.value, allow_stream=True
    )
    check_output(output_file, force, inputs=[Path(file.path) for file in corpus.files])
    if len(corpus.files) > 1 or corpus.kind != TEXT:
        raise InputError(
            f"{input_path}: embed --engine local reads one text file; JSON lines, Parquet and folders need "
            "--engine ray (or annotate)."
        )
    with claimed_output(output_file), bilm_source(model, weights) as source:
        if stateful:
            embed, plan = stateful_embedder(source.folder, layers, precision, batch_size)
        else:
            embed, plan = stateless_embedder(source.folder, layers, precision)
        count = embed_file(
            embed, corpus, output_file, batch_size, provenance(source.identity(), layers, plan)
        )
    typer.echo(f"Wrote {count} sentence{'' if count == 1 else 's'} to {output_file}.")
