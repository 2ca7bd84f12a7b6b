"""What a Ray run's bookkeeping costs on an object store, as the number of output parts grows: an
S3 API server on 127.0.0.1 (moto's, in a process of its own) holds a run folder of PARTS parts
spread over FILES input files, and the run folder's own code lists them, checks their footers
against the manifests, and moves them into the output, each with one request in flight (the code
before) and with `REQUESTS_IN_FLIGHT` (now), side by side; and lists the parts once per run (now)
against once per input file (before: each read task listed the whole folder).

    python bench_object_store.py --parts 10000 --serial-parts 1000 --files 100

The serial baseline runs on `--serial-parts` (fewer: it takes a request's round trip per part).
Needs `pip install "moto[server]"` (the test extra).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.fs
import pyarrow.parquet

from spacy_elmo.corpus.provenance import PROVENANCE_KEY, provenance, schema_metadata, vector_facts
from spacy_elmo.corpus.ray import layout, run_folder
from spacy_elmo.corpus.ray.layout import PART_KEY, MadeWith, check_files, manifest_path, part_path
from spacy_elmo.corpus.ray.run_folder import RunFolder, ids_digest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server() -> subprocess.Popen:
    """moto's S3 server in its own process, and this process's AWS variables pointing at it."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("moto's server did not start")


def filled_run(bucket: str, parts: int, files: int, made: dict) -> RunFolder:
    """A run folder of `parts` one-row parts over `files` input files, with their manifests,
    written 64 requests at a time."""
    import boto3

    boto3.client("s3").create_bucket(Bucket=bucket)
    filesystem = pyarrow.fs.FileSystem.from_uri(f"s3://{bucket}")[0]
    folder = RunFolder(filesystem, f"{bucket}/out")
    per_file = -(-parts // files)
    metadata = schema_metadata(made)

    def write(index: int) -> None:
        file_index, part_index = divmod(index, per_file)
        ids = [index]
        footer = {PART_KEY: json.dumps({"rows": 1, "ids": ids_digest(ids), "tokens": 2}).encode()}
        table = pa.table({"id": ids, "tokens": [["a", "b"]]}).replace_schema_metadata({**metadata, **footer})
        pyarrow.parquet.write_table(
            table, part_path(folder.path, file_index, part_index), filesystem=filesystem
        )

    with ThreadPoolExecutor(64) as pool:
        list(pool.map(write, range(parts)))
    for file_index in range(files):
        count = min(per_file, parts - file_index * per_file)
        digests = [[1, ids_digest([file_index * per_file + n])] for n in range(count)]
        manifest = {"name": f"file-{file_index}", "parts": digests, "id_kind": "integer"}
        folder.write_json(manifest_path(folder.path, file_index), manifest)
    return folder


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(folder: RunFolder, files: int, made_with: MadeWith, in_flight: int) -> dict[str, float]:
    """Seconds to list, check and publish the run folder with `in_flight` requests at a time."""
    layout.REQUESTS_IN_FLIGHT = run_folder.REQUESTS_IN_FLIGHT = in_flight
    figures = {"list once": timed(folder.done_parts)}
    figures["list per file"] = timed(lambda: [folder.part_files() for _ in range(files)])
    results: list = []
    figures["check"] = timed(
        lambda: results.extend(check_files(folder.filesystem, folder.path, list(range(files)), made_with))
    )
    assert not any(result["problems"] for result in results), results[0]["problems"][:3]
    figures["publish (moves)"] = timed(folder.move_parts)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=10_000)
    parser.add_argument("--serial-parts", type=int, default=1_000)
    parser.add_argument("--files", type=int, default=100)
    args = parser.parse_args()
    made = provenance({"kind": "bilm", "name": "bench", "sha256": "0" * 64}, "average", "fp32")
    made_with = MadeWith(PROVENANCE_KEY.encode(), vector_facts(made))
    server = start_server()
    try:
        print(f"moto S3 server on 127.0.0.1; load average {os.getloadavg()[0]:.1f}")
        rows = []
        for parts, in_flight in ((args.serial_parts, 1), (args.serial_parts, 16), (args.parts, 16)):
            started = time.perf_counter()
            folder = filled_run(f"bench-{parts}-{in_flight}", parts, args.files, made)
            print(f"  wrote {parts:,} parts in {time.perf_counter() - started:.1f} s")
            rows.append((parts, in_flight, measure(folder, args.files, made_with, in_flight)))
        print(f"\n{'parts':>7} {'in flight':>9} " + " ".join(f"{name:>16}" for name in rows[0][2]))
        for parts, in_flight, figures in rows:
            print(
                f"{parts:>7,} {in_flight:>9} "
                + " ".join(f"{seconds:>14.2f} s" for seconds in figures.values())
            )
        serial, parallel = rows[0][2], rows[1][2]
        print(
            f"\n{args.serial_parts:,} parts, 16 in flight over 1: "
            + ", ".join(
                f"{name} {serial[name] / parallel[name]:.1f}x" for name in ("check", "publish (moves)")
            )
            + f"; listing once over once per file: {serial['list per file'] / serial['list once']:.0f}x"
        )
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
