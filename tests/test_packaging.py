"""setup.cfg says what the code needs: every import outside the standard library is a declared
dependency (or an extra's), and every package folder is listed for the wheel."""

from __future__ import annotations

import ast
import configparser
import re
import sys

from tests.conftest import REPO_ROOT

# import name -> distribution name, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml"}


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


def test_pydantic_and_torch_are_bounded_to_the_versions_the_code_was_tested_with() -> None:
    requirements = {
        re.split(r"[<>=!~]", line)[0]: line
        for line in (line.strip() for line in setup_cfg()["options"]["install_requires"].splitlines())
        if line and not line.startswith("#")
    }
    assert requirements["pydantic"] == "pydantic>=2,<3"  # training/config.py uses the v2 API
    assert "<" in requirements["torch"], requirements["torch"]


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    listed = set(setup_cfg()["options"]["packages"].split())
    folders = {
        ".".join(path.parent.relative_to(REPO_ROOT).parts)
        for path in (REPO_ROOT / "spacy_elmo").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert folders | {"spacy_elmo.configs"} == listed
