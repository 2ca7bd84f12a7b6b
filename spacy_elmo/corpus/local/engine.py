"""The local engine: the whole input read once, in order, in this process, into one output
file, written under a temporary name and moved into place whole."""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from ...bilm.errors import ConfigError, InputError
from ...bilm.io.atomic import atomic_path, atomic_write_text
from ...pipeline.model_files import ModelSource, bilm_source, pipeline_source
from ..annotator import Annotator
from ..outputs import check_local_output, check_not_model, claimed_output
from ..precision import pipeline_plan
from ..provenance import provenance, schema_metadata, sidecar_path
from ..sources import TEXT, Corpus, find_corpus
from ..summary import RunSummary
from .hdf5 import HDF5_LAYERS, embed_file, stateful_embedder, stateless_embedder
from .tables import annotated_blocks, write_jsonl, write_parquet

OUTPUT_FORMATS = ("hdf5", "jsonl", "parquet")


def output_format_of(output: Path, given: str | None) -> str:
    """`given`, else by the output's suffix: `.parquet` Parquet, `.hdf5`/`.h5` HDF5, else JSON lines."""
    if given is not None:
        return given
    suffix = output.suffix.lower()
    return "parquet" if suffix == ".parquet" else "hdf5" if suffix in (".hdf5", ".h5") else "jsonl"


def run_locally(
    job: Any,
    source: str | Path,
    output: Path,
    *,
    output_format: str | None,
    input_format: str | None,
    stateful: bool,
    force: bool,
    progress_file: TextIO | None,
) -> RunSummary:
    """`job` (a `CorpusJob`) over every row of `source` into the file `output`."""
    started = time.perf_counter()
    kind = output_format_of(output, output_format)
    corpus = find_corpus(source, kind=input_format, allow_stream=True)
    if kind == "hdf5":
        check_hdf5_job(job, corpus, stateful)
    elif stateful:
        raise ConfigError("stateful=True embeds into HDF5 only: give an .hdf5 output (spacy-elmo embed).")
    check_local_output(output, corpus, force=force)
    resolved = bilm_source(job.model, job.weights) if job.model is not None else pipeline_source(job.pipeline)
    with resolved as model:
        check_not_model(str(output), model.folder)
        with claimed_output(output):
            embedding = time.perf_counter()
            if kind == "hdf5":
                rows, tokens = embed_hdf5(job, model, corpus, output, stateful, progress_file)
            else:
                rows, tokens = write_rows(job, model, corpus, output, kind == "parquet", progress_file)
            embedded = time.perf_counter()
    return RunSummary(rows, tokens, embedded - started, embedded - embedding, "in 1 process", str(output))


def check_hdf5_job(job: Any, corpus: Corpus, stateful: bool) -> None:
    if job.model is None:
        raise ConfigError(
            "An HDF5 output holds a biLM's vectors: give model=, or a .jsonl or .parquet output."
        )
    if job.layers not in HDF5_LAYERS:
        raise ConfigError(
            f"layers {job.layers}: the HDF5 file of the local engine holds all, top or average "
            "(mix and none need a pipeline: annotate)."
        )
    if len(corpus.files) > 1 or corpus.kind != TEXT:
        raise InputError(
            f"{corpus.location}: the HDF5 output reads one text file; JSON lines, Parquet and folders need "
            "a .jsonl or .parquet output, or the Ray engine."
        )


def embed_hdf5(
    job: Any, model: ModelSource, corpus: Corpus, output: Path, stateful: bool, progress_file: TextIO | None
) -> tuple[int, int]:
    if stateful:
        embed, plan = stateful_embedder(model.folder, job.layers, job.precision, job.batch_size)
    else:
        embed, plan = stateless_embedder(model.folder, job.layers, job.precision)
    record = provenance(model.identity(), job.layers, plan)
    return embed_file(embed, corpus, output, job.batch_size, record, progress_file)


def write_rows(
    job: Any, model: ModelSource, corpus: Corpus, output: Path, parquet: bool, progress_file: TextIO | None
) -> tuple[int, int]:
    """One output row per input row, in input order: JSON lines or Parquet (vectors as nested
    lists of floats either way), with the provenance in the Parquet file or beside the JSON
    lines. Nothing is written for an input without rows."""
    if model.kind == "bilm":
        annotator = Annotator.from_model(model.folder, layers=job.layers, precision=job.precision)
    else:
        annotator = Annotator.from_pipeline(model.folder, layers=job.layers)
    record = provenance(model.identity(), annotator.layers, pipeline_plan(annotator.nlp))
    counts = {"rows": 0, "tokens": 0}

    def counted(progress: tqdm) -> Any:
        for table, n_bytes in annotated_blocks(annotator, corpus, job.batch_size):
            counts["rows"] += table.num_rows
            counts["tokens"] += sum(len(tokens) for tokens in table.column("tokens").to_pylist())
            progress.update(n_bytes)
            progress.set_postfix_str(f"{counts['rows']:,} rows", refresh=False)
            yield table

    write = partial(write_parquet, metadata=schema_metadata(record)) if parquet else write_jsonl
    with atomic_path(output) as temporary:
        with tqdm(
            total=corpus.total_bytes,
            unit="B",
            unit_scale=True,
            desc="annotating" if model.kind == "pipeline" else "embedding",
            disable=None,
            file=progress_file,
        ) as progress:
            write(counted(progress), temporary)
        if counts["rows"] == 0:
            raise InputError(f"Input {corpus.location} has no rows: there is nothing to annotate.")
        # gone before the output is replaced: an old sidecar never describes a new output
        sidecar_path(output).unlink(missing_ok=True)
    if not parquet:
        atomic_write_text(sidecar_path(output), json.dumps(record, indent=1))
    return counts["rows"], counts["tokens"]
