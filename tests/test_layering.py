"""The layering docs/design.md states, checked on the source: the import graph of every
``kgengine`` module (module-level and lazy imports alike) has no cycle, ``rag`` does not
import ``eval``, no library module imports a command module, and the question sets sit
below both ``rag`` answering and ``eval``. (The store's side — commands import no backend —
is tests/test_store_layering.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the installed package is assembled from these folders (pyproject.toml package-dir)
FOLDERS = {"kgengine": ROOT / "engine", "kgengine.loaders": ROOT / "loaders",
           "kgengine.sparql": ROOT / "sparql", "kgengine.cypher": ROOT / "cypher"}


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
                targets.update(f"{node.module}.{a.name}" for a in node.names)
        graph[name] = {t for t in targets if t in known and t != name}
    return graph


GRAPH = import_graph()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_walk_sees_the_package() -> None:
    # a check that found nothing to check would pass vacuously
    expected = {"kgengine.rag.methods", "kgengine.eval.runner", "kgengine.commands.ask", "kgengine.store"}
    assert expected <= set(GRAPH)
    assert "kgengine.rag.base" in GRAPH["kgengine.rag.llm_methods"]


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def package_of(module: str) -> str:
    """The package a module belongs to for layering: ``kgengine.rag.linking.ranking`` ->
    ``kgengine.rag``; a top-level module is its own (``kgengine.store``)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        package = package_of(module)
        out.setdefault(package, set()).update(package_of(t) for t in targets if package_of(t) != package)
    return out


def test_no_package_cycle() -> None:
    """No cycle between packages either (``questions`` importing ``rag.base`` while ``rag``
    imports ``questions`` is one, though no two modules import each other)."""
    assert cycles(package_graph(GRAPH)) == []


def test_a_package_cycle_is_found() -> None:
    modules = {"k.a.x": {"k.b.y"}, "k.b.y": set(), "k.b.z": {"k.a.w"}, "k.a.w": set()}
    assert cycles(modules) == []  # no module cycle ...
    assert cycles(package_graph(modules)) == [["k.a", "k.b"]]  # ... but a package cycle


def test_the_cycle_finder_finds_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(("source", "target", "why"), [
    ("kgengine.rag", "kgengine.eval", "answering never depends on scoring"),
    ("kgengine.questions", "kgengine.eval", "question sets serve ask and eval alike"),
    ("kgengine.mining", "kgengine.rag", "mining is below answering"),
    ("kgengine.llm", "kgengine.rag", "the LLM client serves every feature"),
])
def test_forbidden_edges(source: str, target: str, why: str) -> None:
    bad = sorted((m, t) for m, ts in GRAPH.items() if m == source or m.startswith(source + ".")
                 for t in ts if t == target or t.startswith(target + "."))
    assert not bad, f"{why}: {bad}"


# the answering layer from the bottom up: reading the graph, rule sets, linking, the method
# context and registry, the methods (a layer imports only those below it)
RAG_LAYERS = [[f"kgengine.rag.{name}" for name in layer.split()] for layer in
              ["graph", "rules", "linking", "methods", "offline planning tog llm_methods"]]


def test_the_answering_layer_points_one_way() -> None:
    def layer(module: str) -> int | None:
        return next((n for n, names in enumerate(RAG_LAYERS)
                     for name in names if module == name or module.startswith(name + ".")), None)

    upward = sorted((m, t) for m, ts in GRAPH.items() for t in ts
                    if layer(m) is not None and layer(t) is not None and layer(t) > layer(m))
    assert not upward
    # the check sees the layers: a sub-module is its package's, and an edge downwards is allowed
    assert layer("kgengine.rag.linking.ranking") == 2
    assert "kgengine.rag.graph.view" in GRAPH["kgengine.rag.rules"]


def test_no_library_module_imports_a_command() -> None:
    bad = sorted((m, t) for m, ts in GRAPH.items()
                 if not (m.startswith("kgengine.commands") or m == "kgengine.cli")
                 for t in ts if t.startswith("kgengine.commands"))
    assert not bad


def test_listing_the_commands_imports_none_of_them() -> None:
    """``kgengine --help`` lists every registered command from the registry's own lines,
    without importing a command module (each pulls in its heavy libraries)."""
    import subprocess
    import sys

    from kgengine.cli import BUILTIN_COMMANDS

    code = ("import sys\nfrom kgengine.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('kgengine.commands.')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"
    for name, (_, line) in BUILTIN_COMMANDS.items():
        assert f"{name} " in done.stdout and line[:40] in done.stdout
