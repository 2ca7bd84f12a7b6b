"""`run_corpus`: one entry point for a corpus job on either engine. The options are checked here,
once, for both engines and before anything slow starts (a model loaded, a cluster joined), so the
Python API refuses what the command line refuses, with the same words.

```python
from spacy_elmo.corpus import run_corpus

run_corpus("news.txt", "annotated.jsonl", pipeline="./my_ner_pipeline")               # this process
run_corpus("s3://bucket/crawl/", "s3://bucket/vectors", model="original", engine="ray")  # Ray
```
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ..bilm.errors import ConfigError
from .job import TARGET_FILE_BYTES, CorpusJob
from .summary import RunSummary

ENGINES = ("local", "ray")


def run_corpus(
    source: str | Path | Any,
    output: str | Path,
    *,
    model: str | Path | None = None,
    pipeline: str | Path | None = None,
    weights: Path | None = None,
    layers: str | None = None,
    precision: str = "fp32",
    batch_size: int = 64,
    engine: str = "local",
    output_format: str | None = None,
    stateful: bool = False,
    rows_per_file: int | None = None,
    target_file_bytes: int = TARGET_FILE_BYTES,
    workers: int | None = None,
    address: str | None = None,
    input_format: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress_file: TextIO | None = None,
) -> RunSummary:
    """Embed (`model`) or annotate (`pipeline`) every row of `source` into `output`.

    source: a file, a folder of files, a glob; with the Ray engine also a URI (`s3://`, `gs://`,
        `hdfs://`, `file://`) or a `ray.data.Dataset` (`id` and `text` or `tokens` columns).
    output: engine "local": one file, HDF5 (`.hdf5`, `.h5`; a biLM's vectors of one text file),
        Parquet (`.parquet`) or JSON lines (any other name), or as `output_format` says;
        engine "ray": a Parquet folder or URI, written only once every input row is in it
        exactly once, in files of `rows_per_file` rows or about `target_file_bytes` each.
    layers: the `vectors` column (default: "average" with `model`, "mix" with `pipeline`).
    stateful: (local, HDF5) carry the LSTM states from one batch to the next (AllenNLP's legacy).
    workers, address, resume: the Ray engine's workers (default one per CPU), the cluster to
        join (default: a local one) and whether to continue the unfinished run into `output`.
    input_format: how to read files ("text", "jsonl", "parquet"), whatever their suffixes say.
    force: replace `output` (and with the Ray engine discard an unfinished run into it).
    progress_file: where the progress bar goes (default: standard error).
    """
    if engine not in ENGINES:
        raise ConfigError(f"engine={engine!r}: use local (this process) or ray (a Ray cluster).")
    if not isinstance(output, (str, Path)) or not str(output):
        raise ConfigError(f"output={output!r}: give the path (or with the Ray engine the URI) to write.")
    if input_format not in (None, "text", "jsonl", "parquet"):
        raise ConfigError(f"input_format={input_format!r}: use text, jsonl or parquet (or leave it out).")
    default_layers = "average" if model is not None else "mix"
    job = CorpusJob(
        model,
        pipeline,
        weights,
        layers or default_layers,
        precision,
        batch_size,
        rows_per_file,
        target_file_bytes,
    )
    if engine == "local":
        refuse_ray_options(
            {"workers": workers, "address": address, "resume": resume, "rows_per_file": rows_per_file}
        )
        if "://" in str(output):
            raise ConfigError(
                f"output={str(output)!r}: the local engine writes a file on this machine: give its path, "
                "or write to a URI with the Ray engine (--engine ray)."
            )
        if output_format not in (None, "hdf5", "jsonl", "parquet"):
            raise ConfigError(
                f"output_format={output_format!r}: use hdf5, jsonl or parquet (or leave it out)."
            )
        from .local.engine import run_locally

        return run_locally(
            job,
            source,
            Path(output),
            output_format=output_format,
            input_format=input_format,
            stateful=stateful,
            force=force,
            progress_file=progress_file,
        )
    if stateful:
        raise ConfigError(
            "stateful carries LSTM states from one batch to the next, so it needs one process reading the "
            "lines in order: use the local engine with it."
        )
    if output_format not in (None, "parquet"):
        raise ConfigError(f"output_format={output_format!r}: the Ray engine writes a Parquet folder.")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"workers={workers!r}: give a whole number of 1 or more (or leave it out).")
    from .ray.engine import run_on_ray

    return run_on_ray(
        job,
        source,
        str(output),
        workers=workers,
        address=address,
        input_format=input_format,
        resume=resume,
        force=force,
        progress_file=progress_file,
    )


def refuse_ray_options(
    given: dict[str, Any], *, spelled: Callable[[str], str] = str, engine: str = "engine='ray'"
) -> None:
    """The Ray engine's options (`given` by name, as the caller `spelled` them) are refused with
    the local engine, which would ignore them."""
    named = [spelled(name) for name, value in given.items() if value]
    if named:
        raise ConfigError(
            f"{', '.join(named)} steer{'s' if len(named) == 1 else ''} the Ray engine ({engine}): add it, "
            f"or leave {'it' if len(named) == 1 else 'them'} out."
        )
