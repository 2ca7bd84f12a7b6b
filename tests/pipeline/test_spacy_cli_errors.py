"""spaCy's own CLI reports our setting and weights errors as one `Error: ...` line, no traceback:
the errors derive from the click exception class that typer's command runner catches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spacy_elmo.configs import shipped_config


def spacy_train(config: Path, *overrides: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m spacy train CONFIG OVERRIDES...` in a fresh interpreter."""
    command = [sys.executable, "-m", "spacy", "train", str(config), *overrides]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=240)


def test_spacy_train_reports_a_bad_setting_as_one_error_line(tmp_path: Path) -> None:
    """The component refuses the precision while spaCy builds the pipeline, before any data is read."""
    done = spacy_train(shipped_config("ner_elmo.cfg"), "--components.elmo.precision", "fp8", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        "Error: [components.elmo] precision = 'fp8': use one of fp32, bf16, int8, auto."
    ], done.stderr
