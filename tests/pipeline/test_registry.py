"""Every published name resolves through its entry point alone, and entry-point names equal
registered names (spaCy looks lazily registered functions up by entry-point name)."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"
REGISTRIES = {
    "spacy_factories": None,
    "spacy_architectures": "spacy.registry.architectures",
    "spacy_misc": "spacy.registry.misc",
    "srsly_msgpack_encoders": "srsly.msgpack_encoders",
    "srsly_msgpack_decoders": "srsly.msgpack_decoders",
}


def entry_points() -> dict[str, dict[str, str]]:
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG)
    section = parser["options.entry_points"]
    groups = {}
    for group in REGISTRIES:
        lines = [line.strip() for line in section.get(group, "").splitlines() if line.strip()]
        groups[group] = dict(line.split(" = ", 1) for line in lines)
    return groups


def test_every_entry_point_resolves_to_a_function_of_the_same_registered_name() -> None:
    groups = entry_points()
    assert groups["spacy_factories"] == {"elmo": "spacy_elmo.pipeline.component:make_elmo"}
    checks = []
    for group, registry in REGISTRIES.items():
        for name, target in groups[group].items():
            if registry is None:
                continue
            module, function = target.split(":")
            checks.append(f"import {module} as m\nassert {registry}.get({name!r}) is m.{function}, {name!r}")
    result = subprocess.run(
        [sys.executable, "-c", "import spacy, srsly\n" + "\n".join(checks)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert len(checks) == 9


def test_a_fresh_process_finds_the_architectures_without_importing_the_package() -> None:
    script = (
        "import sys, spacy\n"
        "names = ['spacy-elmo.ElmoModel.v1', 'spacy-elmo.ElmoEmbed.v1', 'spacy-elmo.ElmoListener.v1',\n"
        "         'spacy-elmo.Tok2VecElmo.v1']\n"
        "assert 'spacy_elmo.pipeline' not in sys.modules  # only the numpy-only doc_data codec is loaded\n"
        "functions = [spacy.registry.architectures.get(name) for name in names]\n"
        "functions += [spacy.registry.misc.get('spacy-elmo.ModelDir.v1')]\n"
        "functions += [spacy.registry.misc.get('spacy-elmo.Published.v1')]\n"
        "print(all(callable(function) for function in functions))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr
