"""What every output of a corpus run says about how it was made, on either engine: a JSON object
under the key `spacy_elmo` with the spacy-elmo `version`, the `model` (kind, name as given, and
sha256: `model_source.py`), the `layers` the vectors hold, and the `precision` plan they were
computed with (a mode, or `auto`'s plan: product -> [[from_rows, mode], ...]).

Where it goes: a Parquet file's schema metadata; an HDF5 file's attributes; beside a JSON-lines
file, whose lines are all rows, the file `_NAME.meta.json` (a leading `_`, so that a folder of
outputs read as input skips it, as it skips `_SUCCESS`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import __version__

PROVENANCE_KEY = "spacy_elmo"
PARQUET_MAGIC, HDF5_MAGIC = b"PAR1", b"\x89HDF\r\n\x1a\n"


def provenance(model: dict[str, str], layers: str, precision: Any) -> dict[str, Any]:
    """The object; `precision` as `scale.precision.plan_json` gives it."""
    return {"version": __version__, "model": model, "layers": layers, "precision": precision}


def vector_facts(record: dict[str, Any]) -> dict[str, Any]:
    """What in a record decides the vectors (all but the version that wrote them: a run resumed
    after an upgrade keeps its parts), as a file's JSON holds it."""
    return {name: value for name, value in json.loads(json.dumps(record)).items() if name != "version"}


def schema_metadata(record: dict[str, Any]) -> dict[bytes, bytes]:
    """For a Parquet file's schema (`Table.replace_schema_metadata`, `Schema.with_metadata`)."""
    return {PROVENANCE_KEY.encode(): json.dumps(record).encode("utf8")}


def sidecar_path(output: Path) -> Path:
    """Where a JSON-lines output's provenance goes: `_NAME.meta.json` beside it."""
    return output.with_name(f"_{output.name}.meta.json")


def read_provenance(path: str | Path) -> dict[str, Any]:
    """The provenance of an output file of either engine, by what the file is (Parquet, HDF5,
    else JSON lines, whose sidecar holds it)."""
    path = Path(path)
    with path.open("rb") as handle:
        magic = handle.read(len(HDF5_MAGIC))
    if magic.startswith(PARQUET_MAGIC):
        import pyarrow.parquet

        return json.loads(pyarrow.parquet.read_schema(path).metadata[PROVENANCE_KEY.encode()])
    if magic == HDF5_MAGIC:
        import h5py

        with h5py.File(path, "r") as handle:
            return json.loads(handle.attrs[PROVENANCE_KEY])
    return json.loads(sidecar_path(path).read_text(encoding="utf8"))
