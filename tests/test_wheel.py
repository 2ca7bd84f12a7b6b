"""The wheel, installed outside the repository, gives a working plugin: the quickstart, the shipped
configs through `spacy-elmo init-config`, a 10-step `spacy train` on the bundled biLM, and the
trained pipeline shipped as a user ships one: `spacy package`, installed beside the wheel, loaded
by name from another folder.

The wheel is built with `python -m build` (no isolation: the test environment's setuptools) and
installed without its dependencies into a fresh venv whose `.pth` file points at this
environment's site-packages for them, so the test needs no network and takes about a minute.
"""

from __future__ import annotations

import json
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow
TIMEOUT_S = 600

CHECK = """
import sys
from pathlib import Path

import spacy
import spacy_elmo
from spacy.tokens import DocBin
from spacy.training import Example

assert Path(spacy_elmo.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), spacy_elmo.__file__
nlp = spacy.blank("en")
nlp.add_pipe("elmo")
doc = nlp("The bank raised rates near the river bank.")
assert doc._.elmo.layers.shape == (3, 9, 256), doc._.elmo.layers.shape
texts = [
    ("Alice moved to Berlin.", [(0, 5, "PER"), (15, 21, "LOC")]),
    ("Bob works in Paris.", [(0, 3, "PER"), (13, 18, "LOC")]),
]
docs = [Example.from_dict(nlp.make_doc(text), {"entities": ents}).reference for text, ents in texts]
DocBin(docs=docs * 4).to_disk("train.spacy")
print("ok", spacy_elmo.__file__)
"""


def run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, (
        f"{' '.join(map(str, command))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def test_the_wheel_works_outside_the_repository(tmp_path: Path) -> None:
    run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(tmp_path / "dist"),
            str(REPO_ROOT),
        ],
        tmp_path,
    )
    (wheel,) = (tmp_path / "dist").glob("spacy_elmo-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    python = venv / "bin" / "python"
    (site_packages,) = (venv / "lib").glob("python3.*/site-packages")
    (site_packages / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        tmp_path,
    )
    work = tmp_path / "work"
    work.mkdir()
    assert "ok" in run([str(python), "-c", CHECK], work)
    spacy_elmo = venv / "bin" / "spacy-elmo"
    run([str(spacy_elmo), "init-config", "config.cfg", "--pipeline", "ner"], work)
    output = run(
        [
            str(python),
            "-m",
            "spacy",
            "train",
            "config.cfg",
            "--paths.train",
            "train.spacy",
            "--paths.dev",
            "train.spacy",
            "--training.max_steps",
            "10",
            "--training.eval_frequency",
            "5",
            "--output",
            "trained",
        ],
        work,
    )
    assert (work / "trained" / "model-last" / "elmo").is_dir(), output

    packages = work / "packages"
    packages.mkdir()
    spacy_package = [str(python), "-m", "spacy", "package", "trained/model-last", str(packages)]
    run([*spacy_package, "--name", "elmo_ner", "--version", "0.0.1"], work)
    (sdist,) = packages.glob("en_elmo_ner-0.0.1/dist/en_elmo_ner-0.0.1.tar.gz")
    meta = json.loads((packages / "en_elmo_ner-0.0.1" / "meta.json").read_text())
    assert any(requirement.startswith("spacy-elmo>=0.1.0") for requirement in meta["requirements"]), meta
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index"]
    run([*install, "--no-build-isolation", "--find-links", str(wheel.parent), str(sdist)], work)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    load = (
        "import spacy\n"
        "nlp = spacy.load('en_elmo_ner')\n"
        "doc = nlp('Alice moved to Berlin.')\n"
        "print(nlp.pipe_names, doc._.elmo.layers.shape, [ent.label_ for ent in doc.ents])\n"
    )
    loaded = run([str(python), "-c", load], elsewhere)
    assert loaded.startswith("['elmo', 'ner'] (3, 5, 256)"), loaded
