"""The store's side of the layering (issue 18, item 4), read from the source: command modules
import no backend (they reach a store through ``kgengine.store`` only), and ``store.py``
knows no backend by its schemes or its name: each backend declares them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from kgengine.errors import StoreError
from kgengine.neo4j_store import Neo4jStore
from kgengine.oxigraph.store import OxigraphStore
from kgengine.store import BACKENDS, backend_class, check_store_location, is_directory_location

ENGINE = Path(__file__).resolve().parent.parent / "engine"
BACKEND_MODULES = {"kgengine.oxigraph", "kgengine.neo4j_store", "pyoxigraph", "neo4j"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((ENGINE / "commands").glob("*.py")), ids=lambda p: p.name)
def test_command_modules_import_no_backend(path: Path) -> None:
    forbidden = {name for name in imported(path)
                 if any(name == b or name.startswith(b + ".") for b in BACKEND_MODULES)}
    assert not forbidden, f"{path.name} imports {sorted(forbidden)}"


def test_store_module_names_no_backend() -> None:
    text = (ENGINE / "store.py").read_text()
    assert "NEO4J_SCHEMES" not in text and '== "oxigraph"' not in text and '"bolt' not in text
    assert not imported(ENGINE / "store.py") & BACKEND_MODULES


def test_backends_declare_their_locations(tmp_path: Path) -> None:
    assert list(BACKENDS) == ["oxigraph", "neo4j"]
    assert backend_class(str(tmp_path / "store")) is OxigraphStore
    for uri in ("neo4j://localhost:7687", "bolt+s://db.example:7687", "NEO4J://host"):
        assert backend_class(uri) is Neo4jStore
    assert is_directory_location(str(tmp_path)) and not is_directory_location("bolt://localhost")
    with pytest.raises(StoreError, match="unsupported store URI scheme 'http'.*neo4j, neo4j\\+s"):
        backend_class("http://localhost:7878/sparql")
    with pytest.raises(StoreError, match="no kgengine store at"):
        check_store_location(str(tmp_path / "missing"))
    check_store_location("neo4j://localhost:7687")  # a server is checked on connecting


def test_worker_reads_graph_slots_through_the_store() -> None:
    worker = ENGINE / "serve" / "worker.py"
    text = worker.read_text()
    assert "META_GRAPH" not in text and "slot_iris" not in text and "data_graph_iris" in text
