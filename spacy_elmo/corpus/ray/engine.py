"""The Ray engine's run (`run_corpus(..., engine="ray")`): a corpus of any size on a Ray cluster
into a Parquet folder.

The calling process lists the input's files and ships the model; Ray's read tasks read and
check the rows and cut them into parts (`cutting.py`), the `PartWriter` actors embed them and
write each part into the run folder (`run_folder.py`), and Ray tasks check every input file
against its manifest.
Only then do the parts become the output. A run whose process died continues with `resume`.
A `ray.data.Dataset` may stand for the files (`inputs.py`: exactly once too, never resumed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from ...bilm.errors import ConfigError, ElmoError
from ..job import CorpusJob
from ..outputs import check_not_model
from ..provenance import PROVENANCE_KEY, schema_metadata, vector_facts
from ..provenance import provenance as record
from ..sources import filesystem_of, find_corpus
from ..summary import RunSummary
from .cluster import connect, import_ray, leaves_ray_as_found, worker_error
from .cutting import TOKEN_OVERHEAD_BYTES, PartCut
from .inputs import CorpusInput, DatasetInput, FileInput
from .layout import MadeWith
from .progress import RunProgress
from .run_folder import RunFolder
from .shipping import ModelBundle, job_bundle

# 3: inputs by modification time too, the model by content; 2: parts cut by size (0.2.0);
# 1: a part per batch
RUN_FORMAT = "spacy-elmo-run/3"


@leaves_ray_as_found
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
    started = time.perf_counter()
    source_input = corpus_input(source, input_format, resume=resume)  # mistakes first: Ray takes seconds
    filesystem, output_path = filesystem_of(str(output))
    run_folder = RunFolder(filesystem, output_path)
    # the output of a run that died while moving its parts into it (not on a local disk) is that
    # run's: the claim below refuses it, or resumes by moving the rest
    moving = run_folder.publishing() is not None
    source_input.check_output(filesystem, output_path, force=force or moving)
    ray = import_ray()
    bundle = job_bundle(job)  # a model that cannot serve is named before a cluster starts, too
    if run_folder.is_local:
        check_not_model(output_path, bundle.read_from)
    with run_folder.claim(resume=resume, force=force, resumable=source_input.resumable):
        settings = run_settings(job, source_input, bundle)
        # a run resumed with other settings is refused before a cluster starts too (its record
        # holds what a new run would measure on the cluster: `measure` is not called)
        resumed = (
            run_folder.start(settings, resume=True, measure=dict) if resume and run_folder.started() else None
        )
        connect(ray, address)
        workers = source_input.workers(workers, int(ray.cluster_resources().get("CPU", 1)))
        bundle_ref = ray.put(bundle)

        def decide() -> dict[str, Any]:
            """What a new run decides once, at its start: its precision plan, where its input's
            files are cut into parts, and the model as every part's provenance names it (a run
            resumed with a copy of the model keeps the first run's name)."""
            per_token = output_bytes_per_token(bundle.vector_shape(), job.layers)
            cut = PartCut.for_run(
                job.rows_per_file, job.target_file_bytes, per_token, source_input.total_bytes, workers
            )
            return {
                "plan": plan_of(ray, bundle_ref, bundle, job),
                "cut": asdict(cut),
                "model_named": bundle.identity(),
            }

        recorded = resumed or run_folder.start(settings, resume=resume, measure=decide)
        embedding = time.perf_counter()
        counts = run_folder.publishing() if resume else None
        if counts is None:
            counts = write_parts(
                ray, run_folder, source_input, job, bundle_ref, recorded, workers, progress_file
            )
        embedded = time.perf_counter()
        run_folder.publish(counts, force=force)
    where = f"on {workers} Ray worker{'s' if workers != 1 else ''}"
    seconds = time.perf_counter() - started
    return RunSummary(counts["rows"], counts["tokens"], seconds, embedded - embedding, where, str(output))


def write_parts(
    ray: Any,
    run_folder: RunFolder,
    source_input: CorpusInput,
    job: CorpusJob,
    bundle_ref: Any,
    recorded: dict[str, Any],
    workers: int,
    progress_file: TextIO | None,
) -> dict[str, int]:
    """Compute the parts not written yet on `workers` PartWriter actors, with a progress bar, by
    the run's `recorded` plan and cut, then check every part; returns {"rows", "tokens"}."""
    from .workers import PartWriter

    made = record(recorded["model_named"], job.layers, recorded["plan"])
    provenance, made_with = schema_metadata(made), MadeWith(PROVENANCE_KEY.encode(), vector_facts(made))
    done = run_folder.done_parts()  # one listing for the run, not one per input file
    tracker = RunProgress(
        source_input.description, source_input.total_bytes, sum(map(len, done.values())), progress_file
    )
    writer_options = {
        "bundle_refs": [bundle_ref],
        "run_folder": run_folder,
        "layers": job.layers,
        "plan": recorded["plan"],
        "provenance": provenance,
        "batch_size": job.batch_size,
    }
    try:
        cut = PartCut(**recorded["cut"])

        def blocks() -> Any:
            return source_input.blocks(ray, run_folder, cut, done, workers)

        for receipts in receipt_batches(ray, blocks, PartWriter, writer_options, workers):
            tracker.update(receipts)
    except ray.exceptions.RayError as error:
        raise run_folder.kept(worker_error(error), resumable=source_input.resumable) from None
    finally:
        tracker.close()
    try:
        rows, tokens = source_input.check(ray, run_folder, tracker.parts, made_with)
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
    """What a resumed run must share with the run it continues: the model by its kind and
    content (the same files copied elsewhere, or named another way, are the same model)."""
    return {
        "format": RUN_FORMAT,
        "input": source_input.settings(),
        "model": {"kind": bundle.kind, "sha256": bundle.sha256},
        "layers": job.layers,
        "precision": job.precision,
        "rows_per_file": job.rows_per_file,
        "target_file_bytes": job.target_file_bytes,
    }


def plan_of(ray: Any, bundle_ref: Any, bundle: ModelBundle, job: CorpusJob) -> Any:
    """The run's precision plan: a mode, or for `auto` (a biLM's, or a pipeline's config's) the
    plan measured once, on a worker at a worker's thread count, as every worker will run it."""
    if bundle.kind == "bilm" and job.precision != "auto":
        return job.precision
    if bundle.kind == "pipeline":
        from confection import Config

        from ..precision import configured_precisions

        config = Config().from_str(bundle.files["config.cfg"].decode("utf8"), interpolate=False)
        configured = set(configured_precisions(config).values())
        if configured <= {"fp32", "bf16", "int8"} and len(configured) <= 1:
            return configured.pop() if configured else "fp32"
    from .workers import measured_plan

    return ray.get(ray.remote(num_cpus=1)(measured_plan).remote([bundle_ref]))


def output_bytes_per_token(vector_shape: tuple[int, int], layers: str) -> int:
    """What one token's row takes in a part, about: its vectors in float32 by `layers`, and its
    text and annotations."""
    n_layers, width = vector_shape
    vectors = {"all": n_layers, "none": 0}.get(layers, 1)
    return 4 * width * vectors + TOKEN_OVERHEAD_BYTES


def receipt_batches(
    ray: Any, blocks: Callable[[], Any], writer: type, writer_options: dict[str, Any], workers: int
) -> Any:
    """The run as a Ray Dataset, streamed: `blocks()` (`CorpusInput.blocks`: one row per part)
    feed `workers` `writer` actors, one part per call; yields their receipts."""
    context = ray.data.DataContext.get_current()
    saved = context.target_max_block_size, context.raise_original_map_exception
    # Ray Data joins a task's outputs into blocks of up to this size (a dataset keeps the value it
    # was made with); one part's rows are one row, so a size below any row makes each part its
    # own Ray block, for any writer to take (a Dataset given keeps its own setting)
    context.target_max_block_size = 1
    context.raise_original_map_exception = True  # a worker's error comes back as itself (`worker_error`)
    try:
        dataset = blocks().map_batches(
            writer,
            fn_constructor_kwargs=writer_options,
            batch_size=1,
            batch_format="pyarrow",
            num_cpus=1,
            concurrency=workers,
        )
    finally:
        context.target_max_block_size, context.raise_original_map_exception = saved
    yield from dataset.iter_batches(batch_size=None, batch_format="pyarrow")


__all__ = ["run_on_ray"]
