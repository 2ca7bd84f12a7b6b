"""Without Ray installed, the local engine works and `--engine ray` or `spacy_elmo.ray_data` say
how to install it. A fresh interpreter in which importing Ray fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter: about 6 s

SCRIPT = """
import sys
sys.modules["ray"] = None  # as if it were not installed
from typer.testing import CliRunner
from spacy_elmo.cli import app

pipeline, corpus, output = sys.argv[1:4]
for engine in ("local", "ray"):
    result = CliRunner().invoke(app, ["annotate", pipeline, corpus, output + engine, "--engine", engine])
    print(engine, result.exit_code, result.output.strip().splitlines()[-1])  # past the progress bar
try:
    import spacy_elmo.ray_data
except ImportError as error:
    print("import:", error)
"""


def test_the_local_engine_needs_no_ray_and_the_ray_engine_says_how_to_get_it(pipeline_path, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Alice moved to Berlin.\nOk\n", encoding="utf8")
    arguments = [str(pipeline_path), str(corpus), str(tmp_path / "out-")]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *arguments], capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[0].startswith("local 0 ")
        and "Wrote 2 rows (6 tokens)" in lines[0]
        and "in 1 process" in lines[0]
    )
    rows = (tmp_path / "out-local").read_text(encoding="utf8").splitlines()
    assert len(rows) == 2 and all('"ents": [' in row and '"deps": [' in row for row in rows)
    assert lines[1] == (
        'ray 1 Error: --engine ray needs Ray Data, not installed here: pip install "spacy-elmo[ray]".'
    )
    assert lines[2].startswith("import: spacy_elmo.ray_data needs Ray Data") and "spacy-elmo[ray]" in lines[2]
    assert not Path(str(tmp_path / "out-ray")).exists()
