"""What a corpus run (`spacy-elmo embed --engine ray`, `spacy_elmo.corpus`) costs the process that
runs the command, and what resuming saves, measured on one local Ray cluster in one run:

1. The command's process: its peak memory (VmHWM) and the bytes it read (rchar: files, pipes
   and sockets alike) for a corpus 1x, 10x and 100x a base size, embedded by a tiny random biLM
   (so the corpus, not the model, dominates). Flat means the process holds no corpus.
2. Resume: the bundled biLM over a corpus, once whole; once killed (SIGKILL) when half of its
   blocks are written and then resumed. The resumed command's wall time over the whole run's.

    python bench/bench_corpus_run.py en_ewt-ud-train.conllu --base-rows 2000 --resume-rows 4000

Each command is a subprocess joined to the bench's cluster (`--address`), so its time includes
loading and shipping the model and starting the workers, as a user's does, but not the
cluster's start. The CPU and the load average are printed beside each figure.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from machine import machine_line
from workload import ud_texts

from spacy_elmo.bilm import BiLM
from spacy_elmo.bilm.config import BiLMConfig

SPAWNED: list[float] = []  # when each command started (wall clock, as file times are)
TINY = BiLMConfig(lstm_dim=16, projection_dim=8, filters=((1, 8), (2, 8)), n_highway=1)


def write_corpus(path: Path, texts: list[str], rows: int) -> Path:
    with open(path, "w", encoding="utf8") as handle:
        for index in range(rows):
            handle.write(texts[index % len(texts)] + "\n")
    return path


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def proc_value(pid: int, file: str, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return int(value.split()[0])
    except OSError:
        return None
    return None


def run_command(arguments: list[str], kill_when: object = None) -> tuple[float, int, int, bool]:
    """(seconds, peak RSS in kB, bytes read, killed) of one command, sampled from /proc every
    20 ms until it ends; `kill_when()` true sends it SIGKILL."""
    started = time.perf_counter()
    SPAWNED.append(time.time())
    process = subprocess.Popen(
        [sys.executable, "-m", "spacy_elmo", *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    peak = read = 0
    killed = False
    while process.poll() is None:
        peak = max(peak, proc_value(process.pid, "status", "VmHWM") or 0)
        read = max(read, proc_value(process.pid, "io", "rchar") or 0)
        if kill_when is not None and not killed and kill_when():
            process.send_signal(signal.SIGKILL)
            killed = True
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    if process.returncode != 0 and not killed:
        raise RuntimeError(process.stderr.read().decode()[-2000:])
    return seconds, peak, read, killed


def footprint(address: str, folder: Path, texts: list[str], base_rows: int, batch_size: int) -> None:
    tiny = folder / "tiny"
    torch.manual_seed(0)
    BiLM(TINY).save(tiny)
    print(
        "\n| corpus | rows | MB | command peak RSS MB | command bytes read MB | output files | "
        "largest file MB | seconds | CPU load |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for multiple in (1, 10, 100):
        corpus = write_corpus(folder / f"corpus-{multiple}.txt", texts, base_rows * multiple)
        output = folder / f"tiny-out-{multiple}"
        arguments = ["embed", str(tiny), str(corpus), str(output), "--engine", "ray", "--address", address]
        seconds, peak, read, _ = run_command([*arguments, "--batch-size", str(batch_size)])
        size = corpus.stat().st_size / 1e6
        files = [part.stat().st_size for part in output.glob("*.parquet")]
        print(
            f"| {multiple}x | {base_rows * multiple:,} | {size:.1f} | {peak / 1e3:.0f} | {read / 1e6:.1f} | "
            f"{len(files)} | {max(files) / 1e6:.1f} | {seconds:.1f} | {load()} |"
        )


def resume_cost(address: str, folder: Path, texts: list[str], rows: int, rows_per_file: int) -> None:
    """Resuming at half, with output files of `rows_per_file` rows (so that a run of a few minutes
    has enough files to be killed half-way)."""
    corpus = write_corpus(folder / "resume.txt", texts, rows)
    blocks = math.ceil(rows / rows_per_file)

    def arguments(output: str) -> list[str]:
        return ["embed", "en_elmo_cpu", str(corpus), str(folder / output), "--engine", "ray"] + [
            "--address",
            address,
            "--rows-per-file",
            str(rows_per_file),
        ]

    whole, _, _, _ = run_command(arguments("whole"))
    print(f"\nwhole run: {rows:,} rows in {blocks} files, {whole:.1f} s ({load()})")
    print(phases(folder / "whole", whole))
    parts = folder / ".killed.spacy-elmo-run" / "parts"

    def half_written() -> bool:
        return parts.is_dir() and sum(1 for _ in parts.glob("part-*.parquet")) >= blocks // 2

    before, _, _, killed = run_command(arguments("killed"), kill_when=half_written)
    assert killed, "the run ended before half of it was written"
    done = sum(1 for _ in parts.glob("part-*.parquet"))
    print(f"killed after {before:.1f} s with {done} of {blocks} files written ({load()})")
    resumed, _, _, _ = run_command([*arguments("killed"), "--resume"])
    print(f"resumed: {resumed:.1f} s ({load()})")
    print(phases(folder / "killed", resumed))
    print(f"resumed / whole: {resumed / whole:.2f}x (target <= 0.6x)")


def phases(output: Path, seconds: float) -> str:
    """The last command's time split by its output parts' times: start-up until its first part was
    written (command, cluster join, model shipped, workers started and loaded, a block embedded),
    the blocks, and the end (after the last part: completeness check, publishing, exit). Parts
    from before the command (a resumed run's) are not its own."""
    spawned = SPAWNED[-1]
    times = sorted(t for part in output.glob("part-*.parquet") if (t := part.stat().st_mtime) >= spawned)
    first, last = times[0] - spawned, times[-1] - spawned
    return (
        f"  start-up {first:.1f} s, {len(times)} blocks {last - first:.1f} s, end {seconds - last:.1f} s "
        f"(of {seconds:.1f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("conllu", type=Path)
    parser.add_argument("--base-rows", type=int, default=2000)
    parser.add_argument("--resume-rows", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rows-per-file", type=int, default=64, help="the resume run's output files")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--resume-only", action="store_true", help="skip the memory and bytes figures")
    args = parser.parse_args()
    texts = ud_texts(args.conllu)
    print(machine_line(torch.get_num_threads()))
    import ray

    context = ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    address = context.address_info["address"]
    try:
        with tempfile.TemporaryDirectory() as folder:
            if not args.resume_only:
                footprint(address, Path(folder), texts, args.base_rows, args.batch_size)
            resume_cost(address, Path(folder), texts, args.resume_rows, args.rows_per_file)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
