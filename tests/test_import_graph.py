"""The package's modules import one another one way: no loop, counting imports inside functions
and under `TYPE_CHECKING` (a loop there is still a loop, only hidden until it runs)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "spacy_elmo"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `path` imports anywhere in its body."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in modules else source)
    return (found & modules) - {name}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: imported_modules(path, set(paths)) for name, path in paths.items()}


def find_loop(graph: dict[str, set[str]]) -> list[str] | None:
    """One loop of the graph as the modules along it, or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module) :] + [module]
        if module in done:
            return None
        for target in sorted(graph[module]):
            loop = visit(target, path + [module])
            if loop:
                return loop
        done.add(module)
        return None

    for module in sorted(graph):
        loop = visit(module, [])
        if loop:
            return loop
    return None


def test_the_finder_sees_a_loop_hidden_in_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_loop(graph) == ["a", "b", "c", "a"]
    assert find_loop({"a": {"b"}, "b": set()}) is None


def test_imports_run_one_way_between_the_modules_of_spacy_elmo():
    graph = import_graph()
    assert "spacy_elmo.bilm.io.model_dir" in graph["spacy_elmo.bilm.model"]  # the graph sees imports
    assert find_loop(graph) is None, " -> ".join(find_loop(graph) or [])


def test_the_read_tasks_and_the_completeness_check_import_neither_torch_nor_spacy():
    """They run in Ray processes of their own beside the writers: torch and spaCy would cost each
    of them seconds of the same cores at a run's start (in a fresh interpreter: this one has both)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import spacy_elmo.corpus.ray.blocks, spacy_elmo.corpus.ray.layout\n"
        "print(sorted({name.partition('.')[0] for name in sys.modules} & {'torch', 'spacy', 'thinc'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def private_imports(path: Path) -> list[str]:
    """The modules of other libraries that `path` imports by a private name (`typer._click`)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.append(node.module)
    return [name for name in names if any(part.startswith("_") for part in name.split(".")[1:])]


def test_no_module_imports_a_private_module_of_another_library() -> None:
    """Private modules move between a library's releases: the package imports public names only."""
    found = {module_name(path): private_imports(path) for path in PACKAGE.rglob("*.py")}
    assert {name: imports for name, imports in found.items() if imports} == {}
