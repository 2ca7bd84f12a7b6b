"""spacy-elmo as a guest in its user's process and machine: no file it was not given is written
(a link planted at a temporary path), and help or a refused argument answers before torch and
spaCy load. Each program runs in a subprocess, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TIMEOUT_S = 120

PLANTED_LINK = """
import os, sys, tempfile
from pathlib import Path
from spacy_elmo.cli import app

# the log's old name, predictable from the process id: planted before the command runs
planted = Path(tempfile.gettempdir()) / f"spacy-elmo-ray-{os.getpid()}.log"
planted.symlink_to(sys.argv[1])
try:
    app(["embed", "en_elmo_cpu", sys.argv[2], sys.argv[3], "--engine", "ray"])
finally:
    planted.unlink(missing_ok=True)
"""


def test_a_link_planted_at_the_ray_log_path_is_never_followed(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's only copy\n", encoding="utf8")
    arguments = [precious, tmp_path / "missing.txt", tmp_path / "out"]
    done = subprocess.run(
        [sys.executable, "-c", PLANTED_LINK, *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 1 and "missing.txt" in done.stderr, done.stderr
    assert precious.read_text(encoding="utf8") == "the user's only copy\n"


LOADED_AFTER = """
import sys
from spacy_elmo.cli import app

try:
    app(sys.argv[1:])
except SystemExit:
    pass
loaded = [name for name in ("torch", "spacy", "thinc", "h5py", "ray") if name in sys.modules]
print(loaded, file=sys.stderr)
"""


def test_help_and_a_refused_argument_answer_before_torch_and_spacy_load() -> None:
    for arguments in (["--help"], ["embed", "--help"], ["annotate", "x", "y", "z", "--batch-size", "0"]):
        done = subprocess.run(
            [sys.executable, "-c", LOADED_AFTER, *arguments],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert done.stderr.splitlines()[-1] == "[]", (arguments, done.stderr)
        assert done.stdout or "Invalid value for '--batch-size'" in done.stderr


def test_the_usage_line_names_every_argument_in_capitals() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "embed", "--help"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert (
        done.stdout.splitlines()[0] == "Usage: python -m spacy_elmo embed [OPTIONS] {MODEL} {INPUT} {OUTPUT}"
    )
