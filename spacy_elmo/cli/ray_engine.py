"""`--engine ray` of `spacy-elmo embed` and `annotate`: the corpus through `ElmoMapper` on a Ray
cluster, written as a Parquet folder with one row per input row.

Ray's engine does the work (scheduling, retries, restarting lost workers); this module reads the
input into a Ray Dataset, writes the output beside its target and moves it there only once every
input id is in it exactly once, and prints a progress bar and a one-line summary.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from ..annotation.inputs import PARQUET, count_rows, read_rows
from ..bilm.errors import ElmoError
from ..bilm.io.atomic import new_folder
from ..hub.names import resolve_name

INSTALL_HINT = 'pip install "spacy-elmo[ray]"'
# the last line of a worker's traceback that is one of our errors: "spacy_elmo.x.SomeError: message"
WORKER_ERROR = re.compile(r"^spacy_elmo\.[\w.]+?(?:Error|Exception): (.+)$", re.MULTILINE)


class Engine(StrEnum):
    local = "local"
    ray = "ray"


EngineOption = Annotated[
    Engine,
    typer.Option(help="local: this process; ray: a Ray cluster, writing a Parquet folder (spacy-elmo[ray])."),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(min=1, help="--engine ray: workers of one CPU each (default: one per CPU of the cluster)."),
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        help="--engine ray: the cluster to join (auto: the one `ray start` runs here; HEAD:6379); "
        "default: start a local cluster on this machine."
    ),
]


class RayEngineError(ElmoError, RuntimeError):
    """Ray is missing, the cluster cannot be joined, or the run did not give every row once."""


@dataclass(frozen=True)
class RunSummary:
    """What a run did, for its one-line summary; `where` says what ran it ("in 1 process")."""

    rows: int
    tokens: int
    seconds: float
    where: str

    def line(self, output: Path) -> str:
        rate = self.tokens / self.seconds if self.seconds else 0.0
        return (
            f"Wrote {self.rows:,} rows ({self.tokens:,} tokens) to {output} in {self.seconds:.1f} s: "
            f"{rate:,.1f} tokens/s {self.where}."
        )


def import_ray() -> Any:
    """Ray, quiet: Ray Data logs only what is critical (our summary and errors speak instead)."""
    os.environ.setdefault("RAY_DATA_LOG_LEVEL", "CRITICAL")
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    try:
        import ray
        import ray.data
    except ImportError:
        raise RayEngineError(f"--engine ray needs Ray Data, not installed here: {INSTALL_HINT}.") from None
    return ray


def connect(ray: Any, address: str | None) -> None:
    """Join the cluster at `address` ("auto": the one started with `ray start` on this machine),
    or start a local one; a process already connected (a notebook, a test) keeps its cluster."""
    if ray.is_initialized():
        return
    import logging

    try:
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        ray.init(address=address or "local", include_dashboard=False, **quiet)
    except ConnectionError as error:
        raise RayEngineError(
            f"Cannot join the Ray cluster at {address}: {error}. Start one with `ray start --head`, or "
            "leave out --address to start a local cluster."
        ) from None


# Writing Parquet takes no CPU of its own (the workers, one CPU each, may fill the cluster, and a
# write task waiting for a free CPU would wait for ever), and as many write tasks run at once as
# there are workers (without a limit, Ray starts a process for every block waiting to be written).
IO_TASKS = {"num_cpus": 0}


def input_dataset(ray: Any, path: Path, kind: str, n_rows: int, batch_size: int) -> Any:
    """The input rows, read here (text and JSONL checked row by row) and handed to Ray in blocks
    of about `batch_size` rows; only the rows pass through this process, never their vectors."""
    n_blocks = max(1, min(math.ceil(n_rows / batch_size), 4096))
    if kind == PARQUET:
        from ..annotation.inputs import parquet_dataset

        table = parquet_dataset(path).to_table()
        block_rows = math.ceil(n_rows / n_blocks)
        return ray.data.from_arrow([table.slice(start, block_rows) for start in range(0, n_rows, block_rows)])
    return ray.data.from_items(list(read_rows(path, kind)), override_num_blocks=n_blocks)


def input_ids(path: Path, kind: str) -> Counter:
    if kind == PARQUET:
        from ..annotation.inputs import parquet_dataset

        return Counter(parquet_dataset(path).to_table(columns=["id"]).column("id").to_pylist())
    return Counter(row["id"] for row in read_rows(path, kind))


def run_on_ray(
    mapper_kwargs: dict[str, Any],
    input_path: Path,
    kind: str,
    output: Path,
    *,
    workers: int | None,
    address: str | None,
    batch_size: int,
) -> RunSummary:
    """Map the input through `ElmoMapper(**mapper_kwargs)` on `workers` actors of one CPU each
    (default: one per CPU of the cluster) and write `output` as a Parquet folder."""
    ray = import_ray()
    from ..ray_data import ElmoMapper

    input_path, output = input_path.resolve(), output.resolve()  # workers do not share our cwd

    n_rows = count_rows(input_path, kind)
    connect(ray, address)
    workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    context = ray.data.DataContext.get_current()
    context.enable_operator_progress_bars = False  # one bar for the whole run
    started = time.perf_counter()
    dataset = input_dataset(ray, input_path, kind, n_rows, batch_size).map_batches(
        ElmoMapper,
        fn_constructor_kwargs=mapper_kwargs,
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=1,
        compute=ray.data.ActorPoolStrategy(size=workers),
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = new_folder(output.with_name(f".{output.name}.{os.getpid()}.tmp"))
    try:
        try:
            dataset.write_parquet(str(temporary), ray_remote_args=IO_TASKS, concurrency=workers)
        except ray.exceptions.RayError as error:
            raise worker_error(error) from None
        seconds = time.perf_counter() - started
        tokens = check_complete(temporary, input_ids(input_path, kind))
        shutil.rmtree(output, ignore_errors=True)  # a folder: check_output refused a file there
        os.replace(temporary, output)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    where = f"on {workers} Ray worker{'s' if workers != 1 else ''}"
    return RunSummary(rows=n_rows, tokens=tokens, seconds=seconds, where=where)


def worker_path(name: str | Path) -> str:
    """An existing path made absolute (workers do not run in our cwd); a name as it is."""
    return str(Path(name).resolve()) if Path(name).exists() else str(name)


def worker_model(model: str) -> str:
    """A biLM as the workers load it: the bundled or a published name as it is (by `hub.names`'
    rule, even beside a folder of that name; each node finds it in its own cache), a path made
    absolute."""
    return model if resolve_name(model).kind != "path" else worker_path(model)


def worker_error(error: Exception) -> Exception:
    """Our own error (a bad row, a model that does not load) as raised in the worker, else Ray's."""
    messages = WORKER_ERROR.findall(str(error))
    return RayEngineError(messages[-1]) if messages else error


def check_complete(folder: Path, expected_ids: Counter) -> int:
    """Refuse an output that lacks an input row or has one twice; return its number of tokens."""
    import pyarrow.compute
    import pyarrow.dataset

    table = pyarrow.dataset.dataset(folder, format="parquet").to_table(columns=["id", "tokens"])
    written = Counter(table.column("id").to_pylist())
    if written != expected_ids:
        missing, extra = expected_ids - written, written - expected_ids
        raise RayEngineError(
            f"The Ray run wrote {table.num_rows} rows for {sum(expected_ids.values())} input rows "
            f"(missing ids: {sorted(missing, key=str)[:5]}, repeated: {sorted(extra, key=str)[:5]}); "
            "nothing was written. Run it again."
        )
    return int(pyarrow.compute.sum(pyarrow.compute.list_value_length(table.column("tokens"))).as_py() or 0)
