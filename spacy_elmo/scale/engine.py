"""`run_corpus`: embed or annotate a corpus of any size on a Ray cluster into a Parquet folder.

```python
from spacy_elmo.scale import run_corpus

summary = run_corpus("s3://bucket/crawl/", "s3://bucket/vectors", model="original", workers=40)
```

The calling process lists the input's files and ships the model; Ray's read tasks read and
check the rows, the `PartWriter` actors embed them and write one part per input block into the
run folder (`run_folder.py`), and each input file is checked against its manifest by a Ray task.
Only then do the parts become the output. A run whose process died continues with `resume`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..bilm.errors import ConfigError, ElmoError, InputError
from ..corpus.outputs import check_corpus_output
from ..corpus.provenance import provenance as record
from ..corpus.provenance import schema_metadata
from ..corpus.sources import Corpus, filesystem_of, find_corpus
from ..corpus.summary import RunSummary
from .cluster import connect, import_ray, worker_error
from .layout import check_file
from .progress import RunProgress
from .run_folder import RunFolder, RunFolderError
from .shipping import ModelBundle, bilm_bundle, pipeline_bundle

RUN_FORMAT = "spacy-elmo-run"


@dataclass(frozen=True)
class CorpusJob:
    """What a run computes: embed with a biLM (`model`, `weights`) or annotate with a trained
    `pipeline`; the `vectors` column as `layers` ("all", "top", "average", "mix", "none");
    the biLM's `precision`; `batch_size` rows per block (a block is the unit of resuming)."""

    model: str | Path | None = None
    pipeline: str | Path | None = None
    weights: Path | None = None
    layers: str = "average"
    precision: str = "fp32"
    batch_size: int = 64

    def bundle(self) -> ModelBundle:
        if (self.model is None) == (self.pipeline is None):
            raise ConfigError("run_corpus: give either model (to embed) or pipeline (to annotate).")
        return (
            bilm_bundle(self.model, self.weights)
            if self.model is not None
            else pipeline_bundle(self.pipeline)
        )


def run_corpus(
    source: str | Path,
    output: str | Path,
    *,
    model: str | Path | None = None,
    pipeline: str | Path | None = None,
    weights: Path | None = None,
    layers: str | None = None,
    precision: str = "fp32",
    batch_size: int = 64,
    workers: int | None = None,
    address: str | None = None,
    input_format: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress_file: TextIO | None = None,
) -> RunSummary:
    """Embed (`model`) or annotate (`pipeline`) every row of `source` into the Parquet folder
    `output`, on `workers` Ray actors of one CPU each (default: one per CPU of the cluster).

    source: a file, a folder of files, a glob, or a URI (`file://`, `s3://`, `gs://`, `hdfs://`).
    output: a folder path or URI; written only once every input row is in it exactly once.
    layers: the `vectors` column (default: "average" with `model`, "mix" with `pipeline`).
    resume: continue the unfinished run of the same job into `output` (its written parts are kept).
    force: replace `output`, and discard an unfinished run into it.
    progress_file: where the progress bar goes (default: standard error).
    """
    default_layers = "average" if model is not None else "mix"
    job = CorpusJob(model, pipeline, weights, layers or default_layers, precision, batch_size)
    corpus = find_corpus(source, kind=input_format)  # mistakes first: importing Ray takes seconds
    filesystem, output_path = filesystem_of(str(output))
    check_corpus_output(filesystem, output_path, corpus, force=force)
    ray = import_ray()
    connect(ray, address)
    workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    run_folder = RunFolder(filesystem, output_path)
    with run_folder.claim(resume=resume, force=force):
        bundle = job.bundle()
        settings = run_settings(job, corpus, bundle)
        plan = run_folder.start(settings, resume=resume, measure=lambda: measure_plan(bundle, job))
        provenance = schema_metadata(record(bundle.identity(), job.layers, plan))
        started = time.perf_counter()
        tracker = RunProgress(corpus, run_folder.count_parts() if resume else 0, progress_file)
        try:
            for receipts in receipt_batches(ray, corpus, run_folder, job, bundle, plan, provenance, workers):
                tracker.update(receipts)
        except ray.exceptions.RayError as error:
            raise run_folder.kept(worker_error(error)) from None
        finally:
            tracker.close()
        try:
            rows, tokens = check_complete(ray, corpus, run_folder)
        except ElmoError as error:
            raise run_folder.kept(error) from None
        run_folder.publish(force=force)
    where = f"on {workers} Ray worker{'s' if workers != 1 else ''}"
    return RunSummary(rows, tokens, time.perf_counter() - started, where, str(output))


def run_settings(job: CorpusJob, corpus: Corpus, bundle: ModelBundle) -> dict[str, Any]:
    """What a resumed run must share with the run it continues."""
    return {
        "format": RUN_FORMAT,
        "input": {"location": corpus.location, "files": corpus.fingerprint()},
        "model": bundle.identity(),
        "layers": job.layers,
        "batch_size": job.batch_size,
        "precision": job.precision,
    }


def measure_plan(bundle: ModelBundle, job: CorpusJob) -> Any:
    """The run's precision plan: measured (or read from the cache) here, once, for `auto`."""
    from ..annotation import Annotator
    from .precision import configured_precisions, pipeline_plan

    if bundle.kind == "bilm" and job.precision != "auto":
        return job.precision
    with bundle.unpacked() as folder:
        if bundle.kind == "bilm":
            nlp = Annotator.from_model(folder, layers="none", precision="auto").nlp
        else:
            from spacy.util import load_config

            configured = set(configured_precisions(load_config(folder / "config.cfg")).values())
            if configured <= {"fp32", "bf16", "int8"} and len(configured) <= 1:
                return configured.pop() if configured else "fp32"
            nlp = Annotator.from_pipeline(folder, layers="none").nlp
    return pipeline_plan(nlp)


def receipt_batches(
    ray: Any,
    corpus: Corpus,
    run_folder: RunFolder,
    job: CorpusJob,
    bundle: ModelBundle,
    plan: Any,
    provenance: dict[bytes, bytes],
    workers: int,
) -> Any:
    """The run as a Ray Dataset, streamed: read tasks (no CPU of their own, so that they never
    wait behind the workers) feed `workers` PartWriter actors, one input block per call; yields
    their receipts."""
    from .workers import ReadFiles, part_writer

    bundle_ref = ray.put(bundle)
    context = ray.data.DataContext.get_current()
    saved = context.target_max_block_size
    # Ray Data joins a task's outputs into blocks of up to this size (a dataset keeps the value it
    # was made with); one input block is one row, so a size below any row makes each input block
    # its own Ray block, for any writer to take
    context.target_max_block_size = 1
    try:
        files = ray.data.from_items(
            [{"file": index} for index in range(len(corpus.files))], override_num_blocks=len(corpus.files)
        )
        dataset = files.map_batches(
            ReadFiles(corpus, run_folder, job.batch_size),
            batch_size=1,
            batch_format="pyarrow",
            num_cpus=0,
            concurrency=min(workers, len(corpus.files)),
        ).map_batches(
            part_writer(
                bundle_ref, run_folder=run_folder, layers=job.layers, plan=plan, provenance=provenance
            ),
            batch_size=1,
            batch_format="pyarrow",
            num_cpus=1,
            concurrency=workers,
        )
    finally:
        context.target_max_block_size = saved
    yield from dataset.iter_batches(batch_size=None, batch_format="pyarrow")


def check_complete(ray: Any, corpus: Corpus, run_folder: RunFolder) -> tuple[int, int]:
    """Every block of every input file has its part with its rows (one Ray task per file, which
    reads the file's manifest and its parts' footers, in a process that imports no torch);
    returns (rows, tokens)."""
    check = ray.remote(num_cpus=0)(check_file)
    paths = (run_folder.filesystem, run_folder.path)
    results = ray.get([check.remote(*paths, index) for index in range(len(corpus.files))])
    problems = [problem for result in results for problem in result["problems"]]
    if problems:
        raise RunFolderError(
            f"The run wrote {len(problems)} block{'s' if len(problems) != 1 else ''} of the input wrongly "
            f"or not at all ({'; '.join(problems[:3])}); nothing was moved to the output. Run the command "
            "again with --resume: it computes only what is missing."
        )
    kinds = {result["id_kind"]: name for result, name in zip(results, corpus.files) if result["id_kind"]}
    if len(kinds) > 1:
        examples = ", ".join(f"{file.name} has {kind} ids" for kind, file in kinds.items())
        raise InputError(
            f"The input's ids are of mixed types ({examples}): give every row an id of one type."
        )
    rows = sum(result["rows"] for result in results)
    if rows == 0:
        raise InputError(f"Input {corpus.location} has no rows: there is nothing to embed.")
    return rows, sum(result["tokens"] for result in results)


__all__ = ["CorpusJob", "run_corpus"]
