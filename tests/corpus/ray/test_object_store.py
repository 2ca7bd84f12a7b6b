"""Corpus runs on a real object store: an S3 API server on 127.0.0.1 (moto's), reached the way a
user reaches S3, MinIO or any S3 store: `s3://` URIs and the standard AWS variables
(`AWS_ENDPOINT_URL`, keys, region) set in the environment of the command and of the cluster's
workers. A glob of input objects, output beside the input in one bucket, a command killed
mid-run and while moving its parts into place, then resumed; a rerun refused without --force;
--force replacing its own prefix and nothing else."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid

import pytest

from ...waiting import wait_for

ray = pytest.importorskip("ray", reason='needs Ray Data: pip install "spacy-elmo[ray]"')
boto3 = pytest.importorskip("boto3", reason='needs moto: pip install "moto[server]"')
import pyarrow.fs  # noqa: E402
import pyarrow.parquet  # noqa: E402

from .test_scale import WIDTH, assert_same_rows, command  # noqa: E402

pytestmark = pytest.mark.slow  # every test runs commands on a Ray cluster: 20 to 90 s each
TIMEOUT_S = 300


@pytest.fixture
def bucket(s3_server: str) -> str:
    """A new, empty bucket on the test's S3 server."""
    name = f"corpus-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def s3() -> pyarrow.fs.S3FileSystem:
    return pyarrow.fs.FileSystem.from_uri("s3://any")[0]


def put_shards(bucket: str, rows: int, shards: int) -> list[dict]:
    """`rows` JSON rows in `shards` objects `in/part-N.jsonl` (and a `_SUCCESS` marker beside them);
    returns the rows."""
    written = [{"id": number, "text": f"row {number} of a corpus on S3"} for number in range(rows)]
    filesystem = s3()
    for shard in range(shards):
        lines = "".join(json.dumps(row) + "\n" for row in written[shard::shards])
        with filesystem.open_output_stream(f"{bucket}/in/part-{shard}.jsonl") as stream:
            stream.write(lines.encode("utf8"))
    with filesystem.open_output_stream(f"{bucket}/in/_SUCCESS") as stream:
        stream.write(b"")
    return written


def keys(bucket: str, prefix: str = "") -> list[str]:
    selector = pyarrow.fs.FileSelector(f"{bucket}/{prefix}".rstrip("/"), recursive=True, allow_not_found=True)
    infos = s3().get_file_info(selector)
    return sorted(info.path for info in infos if info.type == pyarrow.fs.FileType.File)


def written_parts(bucket: str, prefix: str) -> list[str]:
    """The parts under `prefix`: not the hidden temporary files of parts still being written."""
    return [key for key in keys(bucket, prefix) if key.rsplit("/", 1)[1].startswith("part-")]


def rows_on_s3(bucket: str, prefix: str) -> dict:
    table = pyarrow.parquet.read_table(f"{bucket}/{prefix}", filesystem=s3())
    return {row["id"]: row for row in table.to_pylist()}


def run(arguments: list, address: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(*arguments, "--address", address), capture_output=True, text=True, timeout=TIMEOUT_S
    )


def killed_when(arguments: list, address: str, ready: object, what: str) -> None:
    """Start the command and SIGKILL it once `ready()` holds."""
    process = subprocess.Popen(
        command(*arguments, "--address", address), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: ready() or process.poll() is not None, what, timeout_s=TIMEOUT_S)
        assert process.poll() is None, f"the command ended before {what}: {process.stderr.read()[-2000:]}"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()


def test_a_glob_of_objects_into_a_prefix_of_the_same_bucket(ray_cluster, bilm_path, bucket, tmp_path):
    """Input and output in one bucket; the output equals the local disk's; a rerun is refused
    without --force; --force replaces that prefix only (not `out-old/`, not `outer/`, not the input)."""
    rows = put_shards(bucket, rows=24, shards=3)
    for sibling in ("out-old/keep.txt", "outer/keep.txt", "out.txt"):
        with s3().open_output_stream(f"{bucket}/{sibling}") as stream:
            stream.write(b"not ours")
    arguments = [
        "embed",
        bilm_path,
        f"s3://{bucket}/in/part-*.jsonl",
        f"s3://{bucket}/out",
        "--engine",
        "ray",
    ]
    done = run([*arguments, "--batch-size", "4"], ray_cluster)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("Wrote 24 rows")
    got = rows_on_s3(bucket, "out")
    assert sorted(got) == [row["id"] for row in rows]
    local = tmp_path / "in"
    local.mkdir()
    for shard in range(3):
        with s3().open_input_stream(f"{bucket}/in/part-{shard}.jsonl") as stream:
            (local / f"part-{shard}.jsonl").write_bytes(stream.read())
    on_disk = run(["embed", bilm_path, local, tmp_path / "out", "--engine", "ray"], ray_cluster)
    assert on_disk.returncode == 0, on_disk.stderr[-3000:]
    table = pyarrow.parquet.read_table(tmp_path / "out")
    assert_same_rows(got, {row["id"]: row for row in table.to_pylist()})
    assert len(got[0]["vectors"][0]) == WIDTH

    again = run(arguments, ray_cluster)
    assert again.returncode == 1 and f"{bucket}/out exists already: pass --force" in again.stderr
    before = keys(bucket)
    forced = run([*arguments, "--layers", "top", "--force"], ray_cluster)
    assert forced.returncode == 0, forced.stderr[-3000:]
    untouched = [key for key in before if not key.startswith(f"{bucket}/out/")]
    assert untouched == [key for key in keys(bucket) if not key.startswith(f"{bucket}/out/")]
    assert {f"{bucket}/out-old/keep.txt", f"{bucket}/outer/keep.txt", f"{bucket}/out.txt"} <= set(untouched)
    assert sorted(rows_on_s3(bucket, "out")) == [row["id"] for row in rows]


def test_a_command_killed_mid_run_resumes_on_s3(ray_cluster, bilm_path, bucket):
    """Killed once parts are written: without --resume refused; with it the parts written are
    kept (their objects not written again) and every row is in the output once."""
    rows = put_shards(bucket, rows=240, shards=2)
    arguments = ["embed", bilm_path, f"s3://{bucket}/in/", f"s3://{bucket}/out", "--engine", "ray"]
    arguments += ["--rows-per-file", "2", "--batch-size", "2", "--workers", "2"]
    parts = ".out.spacy-elmo-run/parts/"
    killed_when(arguments, ray_cluster, lambda: len(written_parts(bucket, parts)) >= 8, "8 parts on S3")
    kept = written_parts(bucket, parts)
    assert 8 <= len(kept) < 120, "the run ended before it was killed"
    refused = run(arguments, ray_cluster)
    assert (
        refused.returncode == 1 and "has an unfinished run" in refused.stderr and "--resume" in refused.stderr
    )
    resumed = run([*arguments, "--resume"], ray_cluster)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.startswith("Wrote 240 rows")
    got = rows_on_s3(bucket, "out")
    assert sorted(got) == [row["id"] for row in rows]
    assert {key.rsplit("/", 1)[1] for key in kept} <= {key.rsplit("/", 1)[1] for key in keys(bucket, "out/")}
    assert not keys(bucket, ".out.spacy-elmo-run")


def test_a_command_killed_while_moving_its_parts_resumes_by_moving_the_rest(ray_cluster, bilm_path, bucket):
    """S3 has no folder rename: the parts are moved one by one after `publishing.json` is
    written. Killed among the moves, the output is incomplete and other commands are refused;
    --resume moves the rest and computes nothing."""
    rows = put_shards(bucket, rows=300, shards=1)
    arguments = [
        "embed",
        bilm_path,
        f"s3://{bucket}/in/part-0.jsonl",
        f"s3://{bucket}/out",
        "--engine",
        "ray",
    ]
    arguments += ["--rows-per-file", "1", "--workers", "2"]
    publishing = f"{bucket}/.out.spacy-elmo-run/publishing.json"
    killed_when(
        arguments,
        ray_cluster,
        lambda: s3().get_file_info(publishing).type == pyarrow.fs.FileType.File and keys(bucket, "out/"),
        "the first part moved into the output",
    )
    moved = [key for key in keys(bucket, "out/") if key.endswith(".parquet")]
    assert 0 < len(moved) < 300, "the moves ended before the command was killed"
    refused = run(arguments, ray_cluster)
    assert refused.returncode == 1 and "--resume" in refused.stderr
    resumed = run([*arguments, "--resume"], ray_cluster)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.startswith("Wrote 300 rows")
    assert sorted(rows_on_s3(bucket, "out")) == [row["id"] for row in rows]
    assert not keys(bucket, ".out.spacy-elmo-run")
