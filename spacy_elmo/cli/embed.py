"""`spacy-elmo embed`: contextual vectors of a file of sentences into HDF5 (AllenNLP's old `elmo`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import h5py
import numpy as np
import typer
from tqdm import tqdm

from ..bilm import BiLM
from ..bilm.errors import ConfigError, InputError
from ..bilm.io.atomic import atomic_path
from ..corpus.outputs import claimed_output
from ..corpus.reading import decoded_lines
from ..corpus.sources import TEXT, CorpusFile, is_stream, kind_of
from ..hub.loading import load_bilm
from .engines import (
    AddressOption,
    Engine,
    EngineOption,
    InputFormatOption,
    Layers,
    LayersOption,
    ResumeOption,
    WorkersOption,
    check_engine_options,
    run_on_ray,
)
from .main import Force, app, check_output, reports_errors

CHUNK_SENTENCES = 1024  # sentences read and embedded at a time: memory stays flat for any file


class PrecisionChoice(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    int8 = "int8"
    auto = "auto"


LOCAL_LAYERS = (Layers.all, Layers.top, Layers.average)


def read_sentences(path: Path) -> Iterator[list[str]]:
    """Whitespace-tokenised sentences, one per line, read as every corpus is (`corpus.reading`:
    bad bytes named by their offset in the file); an empty line is an error naming it."""
    import pyarrow.fs

    file = CorpusFile(
        pyarrow.fs.LocalFileSystem(), str(path.absolute()), str(path), path.stat().st_size, TEXT
    )
    for number, line, _ in decoded_lines(file):
        tokens = line.split()
        if not tokens:
            raise InputError(
                f"{path}, line {number} is empty: give one sentence per line (remove blank lines)."
            )
        yield tokens


def count_sentences(path: Path) -> int:
    """Read the whole input once before any embedding, so that a bad line stops the command
    before the model loads and the progress bar knows its total."""
    if is_stream(path):
        raise InputError(
            f"{path} is a pipe: embed --engine local reads its input twice (to count the lines, then to "
            "embed them): save it to a file first."
        )
    if not path.is_file():
        what = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise InputError(f"Input file {path} {what}.")
    total = sum(1 for _ in read_sentences(path))
    if total == 0:
        raise InputError(f"Input file {path} is empty: give one whitespace-tokenised sentence per line.")
    return total


def select_layers(layers: np.ndarray, output: Layers) -> np.ndarray:
    """(L + 1, n, 2P) -> all of it, the top layer (n, 2P), or the mean of the layers (n, 2P)."""
    if output is Layers.top:
        return layers[-1]
    if output is Layers.average:
        return layers.mean(axis=0)
    return layers


def chunks(sentences: Iterator[list[str]], size: int) -> Iterator[list[list[str]]]:
    chunk: list[list[str]] = []
    for sentence in sentences:
        chunk.append(sentence)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def embed_file(
    bilm: BiLM, input_file: Path, output_file: Path, output: Layers, batch_size: int, total: int
) -> int:
    """Write one dataset per line (key: the 0-based line index) and `sentence_to_index`; return the count.

    total (int): the number of lines, from `count_sentences`, for the progress bar.
    """
    sentence_to_index: dict[str, str] = {}
    n_written = 0
    with atomic_path(output_file) as temporary, h5py.File(temporary, "w") as handle:
        with tqdm(total=total, unit=" sentences", desc="embedding") as progress:
            for chunk in chunks(read_sentences(input_file), CHUNK_SENTENCES):
                for sentence, layers in zip(chunk, bilm.embed_sentences(chunk, batch_size=batch_size)):
                    key = str(n_written)
                    handle.create_dataset(key, data=select_layers(layers, output))
                    sentence_to_index.setdefault(" ".join(sentence), key)
                    n_written += 1
                    progress.update(1)
        handle.create_dataset("sentence_to_index", data=[json.dumps(sentence_to_index)])
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
            help="UTF-8 text, one whitespace-tokenised sentence per line; with --engine ray also JSON "
            "lines (id and text or tokens) or Parquet, a folder of files, a glob or a URI.",
        ),
    ],
    output: Annotated[
        str, typer.Argument(help="HDF5 file to write; with --engine ray, a Parquet folder (or URI).")
    ],
    force: Force = False,
    weights: Annotated[Path | None, typer.Option("--weights", "-w", help="AllenNLP HDF5 weights.")] = None,
    layers: LayersOption = Layers.average,
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
    ] = PrecisionChoice.fp32,
    engine: EngineOption = Engine.local,
    workers: WorkersOption = None,
    address: AddressOption = None,
    resume: ResumeOption = False,
    input_format: InputFormatOption = None,
) -> None:
    """Embed every line of a text file: dataset "i" holds line i's vectors, as AllenNLP's `elmo` did.
    With --engine ray: every row of a corpus, on a Ray cluster, into Parquet."""
    check_engine_options(engine, workers=workers, address=address, resume=resume)
    if engine is Engine.ray:
        if stateful:
            raise ConfigError(
                "--stateful carries LSTM states from one batch to the next, so it needs one process reading "
                "the lines in order: use --engine local with it."
            )
        options = {"model": model, "weights": weights, "layers": layers.value, "precision": precision.value}
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
            f"--layers {layers.value}: the HDF5 file of --engine local holds all, top or average "
            "(mix and none need a pipeline: annotate)."
        )
    input_file, output_file = Path(input_path), Path(output)
    check_output(output_file, force, inputs=[input_file])
    if input_file.is_file() and kind_of(input_file.name, input_format) != TEXT:
        raise InputError(
            f"{input_file}: embed --engine local reads a text file; JSON lines and Parquet need --engine ray."
        )
    total = count_sentences(input_file)
    with claimed_output(output_file):
        bilm = load_bilm(model, weights, stateful=stateful).set_precision(precision.value)
        count = embed_file(bilm, input_file, output_file, layers, batch_size, total)
    typer.echo(f"Wrote {count} sentence{'' if count == 1 else 's'} to {output_file}.")
