"""The persisted mining index (kgengine.mining.index): written by ``kgengine load``, mapped by
``mine``, never used for another load of the graph, and a writer killed halfway leaves the
graph minable. Also: the mining modules' imports have no cycle through the search."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from kgengine.artifacts import CACHE_ENV, ArtifactCache
from kgengine.cli import main
from kgengine.mining import index as mining_index
from kgengine.mining.graph_index import KGIndex
from kgengine.mining.matrix import MatrixEngine
from kgengine.mining.search import MiningOptions, counting_engine, mine
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore
from test_mining_small import TOY

REPO = Path(__file__).resolve().parent.parent
ONE = MiningOptions(threads=1)


def rows(rules) -> list[tuple]:
    return [(str(r.rule), r.support, r.body_size, r.pca_body_size, r.functional_variable) for r in rules]


def load(location: str, *args: str) -> None:
    result = CliRunner().invoke(main, ["load", "family", "--store", location, "--splits", "facts",
                                       "--graph", "ff", *args])
    assert result.exit_code == 0, result.output


@pytest.fixture
def loaded(tmp_path: Path) -> str:
    location = str(tmp_path / "store")
    load(location)
    return location


def test_load_writes_the_index_beside_the_store_and_mine_maps_it(loaded: str) -> None:
    store = OxigraphStore(loaded)
    try:
        path = mining_index.index_path(store, "ff")
        assert path.parent == Path(loaded).parent / ".store.mining" and path.is_file()
        mapped = mining_index.load_index(store, "ff")
        assert mapped is not None
        assert mapped.mapped_from == path and not mapped.pair_keys.flags.owndata
        built = KGIndex.from_store(store, "ff")
        assert mapped.relations == built.relations and mapped.entities == built.entities
        for name, array in built.arrays().items():
            assert np.array_equal(mapped.arrays()[name], array), name
        assert rows(mine(MatrixEngine(mapped), ONE)) == rows(mine(MatrixEngine(built), ONE))
        # counting_engine (mine, brink build) takes the mapped one
        engine = counting_engine(store, "ff", "matrix", on_read=lambda n: pytest.fail("store scanned"))
        assert engine.index.mapped_from == path
    finally:
        store.close()


def test_an_index_of_another_load_is_never_used(loaded: str, tmp_path: Path) -> None:
    store = OxigraphStore(loaded)
    try:
        path = mining_index.index_path(store, "ff")
        old = path.read_bytes()
        key = mining_index.stamp(store, "ff")
        for change in ({"loaded_at": "2000-01-01T00:00:00+00:00"}, {"triples": key["triples"] + 1},
                       {"location": str(tmp_path / "elsewhere")}, {"format": -1}):
            assert mining_index.read(path, {**key, **change}) is None, change
        # the graph replaced by other triples: the stamp differs, so the old file is not used
        store.load("ff", TOY, dataset="toy", replace=True)
        assert mining_index.load_index(store, "ff") is None
        engine = counting_engine(store, "ff", "matrix")
        assert engine.index.triples == len(set(TOY))
        assert path.read_bytes() != old  # rewritten for the new load
        assert mining_index.load_index(store, "ff") is not None
    finally:
        store.close()


def test_a_damaged_file_is_rebuilt(loaded: str) -> None:
    store = OxigraphStore(loaded)
    try:
        path = mining_index.index_path(store, "ff")
        expected = rows(mine(counting_engine(store, "ff", "matrix"), ONE))
        data = path.read_bytes()
        for damaged in (data[: len(data) // 2], b"nonsense", b""):
            path.write_bytes(damaged)
            assert mining_index.load_index(store, "ff") is None
            assert rows(mine(counting_engine(store, "ff", "matrix"), ONE)) == expected
            assert mining_index.load_index(store, "ff") is not None  # written again
    finally:
        store.close()


def test_a_writer_killed_halfway_leaves_the_graph_minable(loaded: str) -> None:
    store = OxigraphStore(loaded)
    path = mining_index.index_path(store, "ff")
    store.close()
    path.unlink()
    # a writer killed with SIGKILL once it has written part of the temporary file
    script = textwrap.dedent(f"""
        import os, signal
        import numpy as np
        from kgengine.mining import index
        from kgengine.oxigraph.store import OxigraphStore
        calls = []
        real = np.ascontiguousarray
        def dying(array):
            calls.append(1)
            if len(calls) == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(array)
        index.np.ascontiguousarray = dying
        store = OxigraphStore({loaded!r})
        index.write_after_load(store, "ff")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert not path.exists()
    leftovers = list(path.parent.glob(f".{path.name}.*.tmp"))
    assert leftovers  # the half-written temporary, under its own name
    result = CliRunner().invoke(main, ["mine", "--store", loaded, "--graph", "ff", "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert "145 rules" in result.output
    assert path.is_file() and not any(p.exists() for p in leftovers)  # rewritten, leftover gone


def test_replace_through_the_cli_rewrites_the_index(loaded: str) -> None:
    store = OxigraphStore(loaded)
    try:
        first = mining_index.stamp(store, "ff")
    finally:
        store.close()
    load(loaded, "--replace", "--splits", "facts,train")
    store = OxigraphStore(loaded)
    try:
        key = mining_index.stamp(store, "ff")
        assert key != first
        mapped = mining_index.load_index(store, "ff")
        assert mapped is not None and mapped.triples == key["triples"]
    finally:
        store.close()


def test_nowhere_to_write_means_an_index_in_memory(loaded: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(mining_index, "index_cache",
                        lambda store: ArtifactCache(blocker / "sub", kind_folders=False))
    store = OxigraphStore(loaded)
    try:
        rules = mine(counting_engine(store, "ff", "matrix"), ONE)
        assert len(rules) == 145
    finally:
        store.close()


def test_a_server_store_keeps_its_index_in_the_cache_directory(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))

    class Server:
        location = "neo4j://db.example:7687"

    one = mining_index.index_path(Server(), "g")  # type: ignore[arg-type]
    other = mining_index.index_path(Server(), "h")  # type: ignore[arg-type]
    assert one.parent == tmp_path / "cache" / "mining" and one != other


def test_the_file_round_trips_an_index_with_awkward_names(tmp_path: Path) -> None:
    triples = [Triple("é/ü", "r", "b c"), Triple("b c", "s", "\u2603"), Triple("x", "r", "é/ü")]
    built = KGIndex(triples)
    key = {"format": mining_index.FORMAT_VERSION, "graph": "g"}
    path = tmp_path / "i.kgidx"
    mining_index.write(path, built, key)
    mapped = mining_index.read(path, key)
    assert mapped is not None and mapped.entities == built.entities
    assert mapped.entity("\u2603") == built.entity("\u2603")
    empty = KGIndex([])
    mining_index.write(path, empty, key)
    again = mining_index.read(path, key)
    assert again is not None and again.entities == [] and again.triples == 0


def test_mining_engines_do_not_import_the_search() -> None:
    """The search picks an engine by name; the engines import only the shared protocol."""
    for name in ("matrix.py", "graph_index.py", "sparse_kernels.py", "budget.py", "rows.py", "evaluation.py",
                 "candidate_counts.py", "head_tables.py", "body_sizes.py", "query_engine.py", "counting.py",
                 "index.py"):
        tree = ast.parse((REPO / "engine" / "mining" / name).read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                     for alias in node.names}
        assert "kgengine.mining.search" not in imported, name
