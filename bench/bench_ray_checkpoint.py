"""Ray Data's own checkpointing (`DataContext.checkpoint_config`, beta) on a read-to-write pipeline
like a corpus run's, measured on this machine: a Ray Data job reads JSON lines with unique string
ids (`NAME:LINE`, as a text corpus's rows are named), maps them, and writes Parquet with a
`CheckpointConfig`. It is SIGKILLed once half of its output files are written, then run again:
what does the second run read, write and hold?

    python bench_ray_checkpoint.py --rows 1000000

Printed: the rows in the output after the resumed run (duplicates and missing rows), whether the
output folder held files while the first run was unfinished, the checkpoint's size on disk and
the resumed driver's peak memory; the same for a run without a checkpoint, for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = r"""
import sys, time, resource
import ray, ray.data
from ray.data.checkpoint import CheckpointConfig

source, output, checkpoint, kind = sys.argv[1:5]
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
context = ray.data.DataContext.get_current()
if checkpoint != "none":
    context.checkpoint_config = CheckpointConfig(id_column="id", checkpoint_path=checkpoint)
started = time.perf_counter()

def mapped(batch):
    batch["length"] = [len(text) for text in batch["text"]]
    time.sleep(0.15)  # a stand-in for the model's work, so that a run can be killed half-way
    return batch

read = ray.data.read_parquet if kind == "parquet" else (lambda path: ray.data.read_json(path, lines=True))
ds = read(source).map_batches(mapped, batch_size=2000)
ds.write_parquet(output, min_rows_per_file=2000)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def corpus(folder: Path, rows: int, kind: str, files: int = 10) -> Path:
    """`rows` rows in `files` JSON-lines or Parquet files, ids `NAME:LINE`."""
    import pyarrow
    import pyarrow.parquet

    source = folder / f"in-{kind}"
    source.mkdir()
    per_file = rows // files
    for index in range(files):
        name = f"part-{index:03d}.txt"
        rows_of_file = [
            {"id": f"{name}:{line}", "text": f"row {line} of a corpus file"}
            for line in range(1, per_file + 1)
        ]
        if kind == "parquet":
            pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows_of_file), source / f"{name}.parquet")
        else:
            lines = "".join(json.dumps(row) + "\n" for row in rows_of_file)
            (source / f"{name}.jsonl").write_text(lines, encoding="utf8")
    return source


def run(
    script: Path, source: Path, kind: str, output: Path, checkpoint: str, kill_at: int | None = None
) -> dict:
    process = subprocess.Popen(
        [sys.executable, str(script), str(source), str(output), checkpoint, kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen_unfinished = 0
    if kill_at is not None:
        while process.poll() is None:
            written = len(list(output.glob("*.parquet"))) if output.exists() else 0
            if written >= kill_at:
                seen_unfinished = written
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.05)
    stdout, stderr = process.communicate(timeout=1800)
    subprocess.run([str(Path(sys.executable).parent / "ray"), "stop", "--force"], capture_output=True)
    if kill_at is not None:
        return {"files seen before the kill": seen_unfinished}
    if process.returncode != 0:
        errors = [line for line in stderr.splitlines() if "Error" in line]
        return {"failed": errors[-3:] if errors else process.returncode}
    seconds, peak_mb = stdout.split()[-2:]
    return {"seconds": float(seconds), "driver peak MB": int(peak_mb)}


def rows_in(output: Path) -> tuple[int, int]:
    import pyarrow.parquet

    ids = pyarrow.parquet.read_table(output, columns=["id"]).column("id").to_pylist()
    return len(ids), len(set(ids))


def folder_mb(path: Path) -> float:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    import ray

    print(f"Ray {ray.__version__}; {args.rows:,} rows; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        script = root / "job.py"
        script.write_text(JOB, encoding="utf8")
        for kind in ("parquet", "jsonl"):
            source = corpus(root, args.rows, kind)
            whole = run(script, source, kind, root / f"whole-{kind}", "none")
            print(f"{kind} input, without a checkpoint: {whole}")
            files = len(list((root / f"whole-{kind}").glob("*.parquet")))
            output, checkpoint = root / f"out-{kind}", str(root / f"checkpoint-{kind}")
            killed = run(script, source, kind, output, checkpoint, kill_at=max(1, files // 2))
            killed["output files of a whole run"] = files
            print(f"  killed: {killed}; checkpoint {folder_mb(Path(checkpoint)):.1f} MB on disk")
            resumed = run(script, source, kind, output, checkpoint)
            total, distinct = rows_in(output)
            print(f"  resumed: {resumed}; output rows {total:,}, distinct ids {distinct:,} of {args.rows:,}")


if __name__ == "__main__":
    main()
