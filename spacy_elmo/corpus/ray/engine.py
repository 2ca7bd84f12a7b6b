"""`run_corpus`: embed or annotate a corpus of any size on a Ray cluster into a Parquet folder.

```python
from spacy_elmo.corpus import run_corpus

summary = run_corpus("s3://bucket/crawl/", "s3://bucket/vectors", model="original", workers=40)
```

The calling process lists the input's files and ships the model; Ray's read tasks read and
check the rows, the `PartWriter` actors embed them and write one part per input block into the
run folder (`run_folder.py`), and each input file is checked against its manifest by a Ray task.
Only then do the parts become the output. A run whose process died continues with `resume`.
A `ray.data.Dataset` may stand for the files (`inputs.py`: exactly once too, never resumed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO

from ...bilm.errors import ConfigError, ElmoError
from ..job import CorpusJob
from ..provenance import PROVENANCE_KEY, schema_metadata, vector_facts
from ..provenance import provenance as record
from ..sources import filesystem_of, find_corpus
from ..summary import RunSummary
from .cluster import connect, import_ray, worker_error
from .inputs import CorpusInput, DatasetInput, FileInput
from .layout import MadeWith
from .progress import RunProgress
from .run_folder import RunFolder
from .shipping import ModelBundle, job_bundle

RUN_FORMAT = "spacy-elmo-run"


def run_on_ray(
    job: CorpusJob,
    source: str | Path | Any,
    output: str,
    *,
    workers: int | None,
    address: str | None,
    input_format: str | None,
    resume: bool,
    force: bool,
    progress_file: TextIO | None,
) -> RunSummary:
    """`job` over every row of `source` into the Parquet folder `output` (`run_corpus` with
    engine="ray" checked the options), on `workers` actors of one CPU each (default: one per
    CPU of the cluster; for a Dataset one CPU fewer, which its own read tasks need)."""
    source_input = corpus_input(source, input_format, resume=resume)  # mistakes first: Ray takes seconds
    filesystem, output_path = filesystem_of(str(output))
    run_folder = RunFolder(filesystem, output_path)
    # the output of a run that died while moving its parts into it (not on a local disk) is that
    # run's: the claim below refuses it, or resumes by moving the rest
    moving = run_folder.publishing() is not None
    source_input.check_output(filesystem, output_path, force=force or moving)
    ray = import_ray()
    bundle = job_bundle(job)  # a model that cannot serve is named before a cluster starts, too
    connect(ray, address)
    workers = source_input.workers(workers, int(ray.cluster_resources().get("CPU", 1)))
    with run_folder.claim(resume=resume, force=force, resumable=source_input.resumable):
        settings = run_settings(job, source_input, bundle)
        plan = run_folder.start(settings, resume=resume, measure=lambda: measure_plan(bundle, job))
        started = time.perf_counter()
        counts = run_folder.publishing() if resume else None
        if counts is None:
            counts = write_parts(ray, run_folder, source_input, job, bundle, plan, workers, progress_file)
        run_folder.publish(counts, force=force)
    where = f"on {workers} Ray worker{'s' if workers != 1 else ''}"
    return RunSummary(counts["rows"], counts["tokens"], time.perf_counter() - started, where, str(output))


def write_parts(
    ray: Any,
    run_folder: RunFolder,
    source_input: CorpusInput,
    job: CorpusJob,
    bundle: ModelBundle,
    plan: Any,
    workers: int,
    progress_file: TextIO | None,
) -> dict[str, int]:
    """Compute the blocks that have no part yet on `workers` PartWriter actors, with a progress
    bar, then check every part; returns the run's {"rows", "tokens"}."""
    from .workers import part_writer

    made = record(bundle.identity(), job.layers, plan)
    provenance, made_with = schema_metadata(made), MadeWith(PROVENANCE_KEY.encode(), vector_facts(made))
    tracker = RunProgress(
        source_input.description, source_input.total_bytes, run_folder.count_parts(), progress_file
    )
    try:
        writers = part_writer(
            ray.put(bundle), run_folder=run_folder, layers=job.layers, plan=plan, provenance=provenance
        )
        for receipts in receipt_batches(ray, source_input.blocks, run_folder, job, writers, workers):
            tracker.update(receipts)
    except ray.exceptions.RayError as error:
        raise run_folder.kept(worker_error(error), resumable=source_input.resumable) from None
    finally:
        tracker.close()
    try:
        rows, tokens = source_input.check(ray, run_folder, tracker.blocks, made_with)
    except ElmoError as error:
        raise run_folder.kept(error, resumable=source_input.resumable) from None
    return {"rows": rows, "tokens": tokens}


def corpus_input(source: Any, input_format: str | None, *, resume: bool) -> CorpusInput:
    """Files to find, or a Dataset given; what a Dataset cannot do is refused here."""
    if isinstance(source, (str, Path)):
        return FileInput(find_corpus(source, kind=input_format))
    if not isinstance(source, import_ray().data.Dataset):
        raise ConfigError(
            f"run_corpus reads a path, a URI or a ray.data.Dataset, not a {type(source).__name__}."
        )
    if input_format is not None:
        raise ConfigError(f"input_format={input_format!r} reads files: a Dataset has its columns already.")
    if resume:
        raise ConfigError(
            "resume=True needs files that run_corpus reads itself (a path or URI): Ray may cut a "
            "Dataset into other blocks in another run, so the blocks already written cannot be matched "
            "to it. Pass the Dataset's files as the source to resume, or force=True to start over."
        )
    return DatasetInput(source)


def run_settings(job: CorpusJob, source_input: CorpusInput, bundle: ModelBundle) -> dict[str, Any]:
    """What a resumed run must share with the run it continues."""
    return {
        "format": RUN_FORMAT,
        "input": source_input.settings(),
        "model": bundle.identity(),
        "layers": job.layers,
        "batch_size": job.batch_size,
        "precision": job.precision,
    }


def measure_plan(bundle: ModelBundle, job: CorpusJob) -> Any:
    """The run's precision plan: measured (or read from the cache) here, once, for `auto`."""
    from ..annotator import Annotator
    from ..precision import configured_precisions, pipeline_plan

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
    ray: Any, blocks: Any, run_folder: RunFolder, job: CorpusJob, writers: type, workers: int
) -> Any:
    """The run as a Ray Dataset, streamed: the input's `blocks` (`CorpusInput.blocks`) feed
    `workers` PartWriter actors, one block per call; yields their receipts."""
    context = ray.data.DataContext.get_current()
    saved = context.target_max_block_size
    # Ray Data joins a task's outputs into blocks of up to this size (a dataset keeps the value it
    # was made with); one input block is one row, so a size below any row makes each input block
    # its own Ray block, for any writer to take (a Dataset given keeps its own setting)
    context.target_max_block_size = 1
    try:
        dataset = blocks(ray, run_folder, job.batch_size, workers).map_batches(
            writers, batch_size=1, batch_format="pyarrow", num_cpus=1, concurrency=workers
        )
    finally:
        context.target_max_block_size = saved
    yield from dataset.iter_batches(batch_size=None, batch_format="pyarrow")


__all__ = ["run_on_ray"]
