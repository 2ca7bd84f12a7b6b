"""setup.cfg says what the code needs: every import outside the standard library is a declared
dependency (or an extra's), every package folder is listed for the wheel, and the built wheel's
metadata bounds the dependencies whose next major versions the code does not run on."""

from __future__ import annotations

import ast
import configparser
import email.parser
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO_ROOT

# import name -> distribution name, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml"}
TESTED_TORCH = "2.13.0"  # the version the README says the tests run with


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(REPO_ROOT / "setup.cfg")
    return parser


def requirement_names(text: str) -> set[str]:
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    return {re.split(r"[<>=!~\[; ]", line)[0].lower() for line in lines if line}


def third_party_imports() -> dict[str, str]:
    """Top-level module names the package imports that are neither ours nor the standard library's,
    each with one file that imports it."""
    found: dict[str, str] = {}
    for path in [*(REPO_ROOT / "spacy_elmo").rglob("*.py"), *(REPO_ROOT / "configs").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("spacy_elmo", "__future__"):
                    found.setdefault(top, str(path.relative_to(REPO_ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    config = setup_cfg()
    declared = requirement_names(config["options"]["install_requires"])
    for extra in config["options.extras_require"].values():
        declared |= requirement_names(extra)
    missing = {
        name: where
        for name, where in third_party_imports().items()
        if DISTRIBUTIONS.get(name, name).replace("_", "-") not in declared
    }
    assert not missing, f"imported but not declared in setup.cfg: {missing}"


def wheel_requirements(folder: Path) -> dict[str, Requirement]:
    """The unconditional `Requires-Dist` of a wheel built from the repository, by name."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*command, "-q", "--wheel-dir", str(folder), str(REPO_ROOT)], check=True, timeout=300)
    (wheel,) = folder.glob("spacy_elmo-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        message = email.parser.BytesParser().parsebytes(archive.read(metadata))
    requirements = [Requirement(line) for line in message.get_all("Requires-Dist") or []]
    return {requirement.name: requirement for requirement in requirements if requirement.marker is None}


@pytest.mark.slow
def test_the_wheel_bounds_pydantic_and_torch_to_the_versions_the_code_was_tested_with(tmp_path: Path) -> None:
    requirements = wheel_requirements(tmp_path)
    pydantic = requirements["pydantic"].specifier  # training/config.py uses the v2 API
    assert pydantic.contains("2.9.0") and not pydantic.contains("1.10.0") and not pydantic.contains("3.0.0")
    torch = requirements["torch"].specifier
    assert torch.contains(TESTED_TORCH) and not torch.contains("99.0"), torch


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    listed = set(setup_cfg()["options"]["packages"].split())
    folders = {
        ".".join(path.parent.relative_to(REPO_ROOT).parts)
        for path in (REPO_ROOT / "spacy_elmo").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert folders | {"spacy_elmo.configs"} == listed
