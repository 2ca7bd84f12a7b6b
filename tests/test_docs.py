"""The docs run: every fenced block of README.md and docs/*.md, and docs/reference.md's coverage.

A block is skipped only when the line before its fence is `<!-- no-test: reason -->` (data, a
network, long runs). Python blocks run in a fresh interpreter, bash blocks in bash, both in a
temporary folder that links the repository's `spacy_elmo/`, `configs/`, `project/` and
`bench/`, and holds the sample files the block names (`SAMPLES`: the first sentences of UD
English-EWT, read from the shared data, never copied into the repository); ini blocks must
parse as configs.
"""

from __future__ import annotations

import configparser
import inspect
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from thinc.api import Config

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
NO_TEST = re.compile(r"^<!-- no-test: (\S.*) -->$")
LINKED = ("spacy_elmo", "configs", "project", "bench")
TIMEOUT_S = 300  # a block that trains a pipeline runs five commands, each loading spaCy and torch
SAMPLES = {
    "train.conllu": ("ud_en_ewt/en_ewt-ud-train.conllu", 40),
    "dev.conllu": ("ud_en_ewt/en_ewt-ud-dev.conllu", 20),
}
"""Files a block may name as the user's own data: each the first N sentences of a shared CoNLL-U file."""


@dataclass
class Block:
    page: str
    line: int
    language: str
    code: str
    skip_reason: str | None
    printed: list[str]
    """What the page says the block prints: the quoted parts of an "It prints `...`" sentence."""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def code_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(k for k in range(index + 1, len(lines)) if lines[k].startswith("```"))
        marker = NO_TEST.match(lines[index - 1]) if index else None
        after = " ".join(next(iter(paragraphs_after(lines, end)), "").split())
        printed = re.findall(r"`([^`]+)`", after.split(". ")[0]) if after.startswith("It prints `") else []
        blocks.append(
            Block(
                page=str(path.relative_to(ROOT)),
                line=index + 1,
                language=opening.group(1),
                code="\n".join(lines[index + 1 : end]) + "\n",
                skip_reason=marker.group(1) if marker else None,
                printed=printed,
            )
        )
        index = end + 1
    return blocks


def paragraphs_after(lines: list[str], fence_end: int) -> list[str]:
    """The first paragraph after the closing fence at `fence_end` (empty if none follows)."""
    rest = "\n".join(lines[fence_end + 1 :]).strip("\n")
    return rest.split("\n\n")[:1]


BLOCKS = [block for page in PAGES for block in code_blocks(page)]
RUNNABLE = ("python", "bash", "ini")
RUN = [block for block in BLOCKS if block.skip_reason is None and block.language in RUNNABLE]


def test_the_collector_finds_what_a_page_says_a_block_prints() -> None:
    quickstart = next(block for block in RUN if block.printed)
    assert quickstart.page == "README.md"
    assert quickstart.printed == ["same sense 0.869, other sense 0.822", "0.835 same sense, 0.849 other"]


def test_the_collector_finds_the_pages_blocks() -> None:
    """Guards the collector itself: a parsing slip must not turn the docs test into a no-op."""
    languages = {block.language for block in RUN}
    assert {"python", "bash", "ini"} <= languages
    assert any(block.page == "README.md" and block.language == "python" for block in RUN)


def test_every_skipped_block_says_why_and_every_other_block_is_runnable() -> None:
    for block in BLOCKS:
        if block.skip_reason is None:
            assert block.language in RUNNABLE, (
                f"{block.id}: a ```{block.language} block is neither runnable nor marked "
                "`<!-- no-test: reason -->` on the line before its fence"
            )


def _with_parent_sections(fragment: str) -> str:
    """A config fragment (`[components.ner.model.tok2vec]` alone) with its parent sections added,
    so that it parses as a whole config."""
    sections = re.findall(r"^\[([^\]]+)\]", fragment, flags=re.MULTILINE)
    parents = []
    for section in sections:
        parts = section.split(".")
        for end in range(1, len(parts)):
            parent = ".".join(parts[:end])
            if parent not in sections and parent not in parents:
                parents.append(parent)
    return "".join(f"[{parent}]\n" for parent in parents) + fragment


def _first_sentences(conllu: Path, count: int) -> str:
    """The first `count` sentences of a CoNLL-U file (each ends with a blank line)."""
    lines = []
    with open(conllu, encoding="utf8") as handle:
        for line in handle:
            lines.append(line)
            count -= not line.strip()
            if count == 0:
                break
    return "".join(lines)


def _run_folder(tmp_path: Path, block: Block, request: pytest.FixtureRequest) -> Path:
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    for name, (source, count) in SAMPLES.items():
        if name in block.code:
            shared_data = request.getfixturevalue("shared_data")  # skips the block without it
            (tmp_path / name).write_text(_first_sentences(shared_data / source, count), encoding="utf8")
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=lambda block: block.id)
def test_code_block_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if block.language == "ini":
        Config().from_str(_with_parent_sections(block.code), interpolate=False)
        return
    environment = dict(os.environ)
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}"
    command = (
        [sys.executable, "-c", block.code] if block.language == "python" else ["bash", "-e", "-c", block.code]
    )
    result = subprocess.run(
        command,
        cwd=_run_folder(tmp_path, block, request),
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, f"{block.id} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    for expected in block.printed:  # the page's "It prints `...`" holds
        assert expected in result.stdout, f"{block.id} printed {result.stdout!r}, the page says {expected!r}"


# -- docs/reference.md covers everything registered and every command ---------------------------

REFERENCE = (ROOT / "docs" / "reference.md").read_text(encoding="utf8")


def _section(heading: str) -> str:
    """The text of the reference section whose `### ` heading contains `heading`."""
    parts = re.split(r"^### ", REFERENCE, flags=re.MULTILINE)
    matches = [part for part in parts if part.splitlines()[0].find(heading) >= 0]
    assert matches, f"docs/reference.md has no section for {heading}: run `python docs/make_reference.py`"
    return matches[0]


def _entry_points() -> list[tuple[str, str]]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    rows = []
    for group in ("spacy_architectures", "spacy_misc"):
        for line in parser["options.entry_points"][group].strip().splitlines():
            name, target = (part.strip() for part in line.split("="))
            rows.append((name, target))
    return rows


@pytest.mark.parametrize("name,target", _entry_points())
def test_reference_lists_every_registered_function_and_argument(name: str, target: str) -> None:
    module, function_name = target.split(":")
    function = getattr(__import__(module, fromlist=[function_name]), function_name)
    section = _section(f"`{name}`")
    for argument in inspect.signature(function).parameters:
        assert f"`{argument}`" in section, f"docs/reference.md: {name} lacks its argument {argument}"


def test_reference_lists_every_setting_of_the_elmo_component() -> None:
    from spacy.language import Language

    import spacy_elmo.pipeline.component  # noqa: F401  (registers the factory)

    section = REFERENCE[REFERENCE.index("## The `elmo` component") :]
    for key in Language.get_factory_meta("elmo").default_config:
        assert f"| `{key}` |" in section, f"docs/reference.md lacks the elmo setting {key}"


def _commands():
    from spacy_elmo.cli import app

    return typer.main.get_command(app).commands.items()


@pytest.mark.parametrize("name", [name for name, _ in _commands()])
def test_reference_lists_every_command_and_option(name: str) -> None:
    command = dict(_commands())[name]
    section = _section(f"`spacy-elmo {name}`")
    for parameter in command.params:
        if parameter.param_type_name == "argument":
            assert f"`{parameter.name.upper()}`" in section, f"spacy-elmo {name} lacks {parameter.name}"
        else:
            for option in parameter.opts + parameter.secondary_opts:
                assert f"`{option}`" in section, f"docs/reference.md: spacy-elmo {name} lacks {option}"


def test_reference_lists_every_environment_variable_the_package_reads() -> None:
    section = REFERENCE[REFERENCE.index("## Environment variables") : REFERENCE.index("## Commands")]
    sources = (ROOT / "spacy_elmo").rglob("*.py")
    variables = {name for path in sources for name in re.findall(r'"(SPACY_ELMO_[A-Z_]+)"', path.read_text())}
    assert variables
    for variable in sorted(variables):
        assert f"| `{variable}` |" in section, f"docs/reference.md lacks {variable}: run make_reference.py"
