"""Vectors of a text file's lines into one HDF5 file, in the layout of AllenNLP's old `elmo`
command, so that a script written for its files reads ours: a dataset per line keyed by the
line's index from 0 ("0" is the first line, whose row id is 1), `sentence_to_index` (one JSON
string mapping each stripped line to its key, the last of equal lines winning, as AllenNLP wrote
it), and the provenance as the file's attribute `spacy_elmo`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import h5py
import numpy as np
from tqdm import tqdm

from ...bilm.errors import InputError
from ...bilm.io.atomic import atomic_path
from ...hub.loading import load_bilm
from ..annotator import Annotator
from ..precision import PlanJSON, pipeline_plan, plan_json
from ..provenance import PROVENANCE_KEY
from ..reading import read_blocks
from ..rows import LayerChoice, select_layers
from ..sources import Corpus
from .room import BYTES_PER_DATASET, BYTES_PER_FILE, check_room

HDF5_LAYERS: tuple[LayerChoice, ...] = ("all", "top", "average")
LineEmbedder = Callable[[list[str], list[Any]], list[np.ndarray]]


def stateless_embedder(folder: Path, layers: LayerChoice, precision: str) -> tuple[LineEmbedder, PlanJSON]:
    """Lines through the `elmo` component, as every other engine and output embeds them: a line
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
    embed: LineEmbedder,
    corpus: Corpus,
    output_file: Path,
    batch_size: int,
    provenance: dict[str, Any],
    progress_file: TextIO | None = None,
) -> tuple[int, int]:
    """Write one dataset per line (a blank line gets no vectors), `sentence_to_index`, and the
    provenance, reading the file once; returns (lines, tokens)."""
    sentence_to_index: dict[str, str] = {}  # AllenNLP's: a later equal line replaces the key
    n_written = n_tokens = 0
    with atomic_path(output_file) as temporary, h5py.File(temporary, "w") as handle:
        with tqdm(
            total=corpus.total_bytes,
            unit="B",
            unit_scale=True,
            desc="embedding",
            disable=None,
            file=progress_file,
        ) as progress:
            for block in read_blocks(corpus.files[0], batch_size, name_ids=False):
                ids, texts = block.table.column("id").to_pylist(), block.table.column("text").to_pylist()
                embedded = embed(texts, ids)
                needed = sum(vectors.nbytes + BYTES_PER_DATASET for vectors in embedded)
                check_room(temporary, output_file, needed + BYTES_PER_FILE)
                for row_id, text, vectors in zip(ids, texts, embedded):
                    key = allennlp_key(row_id)
                    handle.create_dataset(key, data=vectors)
                    sentence_to_index[text.strip()] = key
                    n_tokens += vectors.shape[-2]
                n_written += len(ids)
                progress.update(block.end_byte - block.start_byte)
        if n_written == 0:
            raise InputError(
                f"Input file {corpus.location} is empty: give one whitespace-tokenised sentence per line."
            )
        index = json.dumps(sentence_to_index)
        check_room(temporary, output_file, len(index.encode("utf8")) + BYTES_PER_FILE)
        handle.create_dataset("sentence_to_index", data=[index])
        handle.attrs[PROVENANCE_KEY] = json.dumps(provenance)
    return n_written, n_tokens


def allennlp_key(row_id: int) -> str:
    """The dataset key of the line whose row id (line number from 1) is `row_id`: its index from
    0, as AllenNLP's `elmo` command numbered lines."""
    return str(row_id - 1)
