"""What is particular to the Neo4j backend, on a real Neo4j (tests/neo4j_server.py starts
one): relationship-type escaping, the faults (unreachable server, wrong password, a load
killed half-way), credentials, progress, the routing scheme. The store protocol itself is
tested on both backends by tests/test_store_contract.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kgengine.errors import GraphIncompleteError, KGEngineError, StoreError
from kgengine.loaders.base import DelimitedTriples
from kgengine.model import Relation, Triple
from kgengine.neo4j_store import Neo4jStore, relationship_type, render
from kgengine.progress import Reporter
from kgengine.store import open_store
from neo4j_server import Neo4jServer

pytestmark = pytest.mark.neo4j

def test_nul_in_a_relation_name_is_refused_and_keeps_the_graph(
    neo4j_server: Neo4jServer, neo4j_store: Neo4jStore
) -> None:
    graph = neo4j_server.graph("refuse-nul")
    good = [Triple("a", "r", "b"), Triple("b", "r", "c")]
    neo4j_store.load(graph, good, dataset="tiny", replace=True)
    with pytest.raises(KGEngineError, match="NUL"):
        neo4j_store.load(graph, [Triple("x", "bad\x00name", "y")], dataset="tiny", replace=True)
    assert set(neo4j_store.triples(graph)) == set(good)
    assert neo4j_store.graph_info(graph).status == "complete"
    neo4j_store.drop(graph)


def test_read_only_store_refuses_writes(neo4j_server: Neo4jServer) -> None:
    with neo4j_server.store(read_only=True) as store, pytest.raises(StoreError, match="read-only"):
        store.load(neo4j_server.graph("ro"), [Triple("a", "r", "b")], dataset="tiny")


# ---- hostile relation names -------------------------------------------------------------------
def test_relationship_type_escaping() -> None:
    assert relationship_type("a`b") == "`a``b`"
    assert relationship_type("with space") == "`with space`"
    for bad in ("", "a\x00b"):
        with pytest.raises(KGEngineError):
            relationship_type(bad)
    text = "MATCH ()-[:{{rel:r}}]->() // {{rel:r}} in a comment is ignored\n// {{body}}\nRETURN 1"
    assert render(text, {"r": Relation("{{body}}")}).startswith("MATCH ()-[:`{{body}}`]->()")
    assert "`a`|`b`" in render(text, {"r": [Relation("a"), Relation("b")]})
    for params in ({}, {"r": "plain string"}, {"r": []}):
        with pytest.raises((KeyError, TypeError)):
            render(text, params)


# ---- faults: unreachable server, wrong password --------------------------------------------
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts TCP connections and never says a word (a hung server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


@pytest.mark.parametrize("scheme", ["bolt", "neo4j"])
def test_unreachable_server_fails_fast(scheme: str, silent_server: int) -> None:
    for port in (_closed_port(), silent_server):
        started = time.monotonic()
        with pytest.raises(StoreError, match="cannot reach Neo4j"):
            Neo4jStore(f"{scheme}://127.0.0.1:{port}", auth=("neo4j", "x" * 8), connection_timeout=2)
        # socket timers, not CPU work, set this time, so a busy machine does not stretch it;
        # the bound stays under the driver's own 30 s default, which it would take if ours
        # were not applied
        assert time.monotonic() - started < 25, port


def test_unreachable_server_from_open_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_CONNECTION_TIMEOUT", "2")
    with pytest.raises(StoreError, match="cannot reach Neo4j"):
        open_store(f"bolt://127.0.0.1:{_closed_port()}")


def test_wrong_password_is_a_clear_auth_error(neo4j_server: Neo4jServer) -> None:
    with pytest.raises(StoreError, match="refused the credentials of user") as info:
        Neo4jStore(neo4j_server.uri, auth=(neo4j_server.user, "not-the-password"))
    assert "NEO4J_PASSWORD" in str(info.value)


def test_credentials_from_the_environment(neo4j_server: Neo4jServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_USER", neo4j_server.user)
    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_server.password)
    with open_store(neo4j_server.uri) as store:
        assert store.backend == "neo4j"
        store.graphs()


# ---- a load killed half-way ---------------------------------------------------------------------
KILLED_LOAD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kgengine.loaders.base import DelimitedTriples
    from kgengine.neo4j_store import Neo4jStore
    from kgengine.progress import Reporter

    class Tell(Reporter):
        def advance(self, n: int = 1) -> None:
            print("batch", n, flush=True)

    uri, user, password, graph, path = sys.argv[1:]
    store = Neo4jStore(uri, auth=(user, password), batch_size=200)
    store.load(graph, DelimitedTriples((Path(path),)), dataset="fb15k-237", progress=Tell())
    print("finished", flush=True)
""")


@pytest.mark.slow
def test_load_killed_half_way_then_rerun_gives_exact_counts(
    neo4j_server: Neo4jServer, neo4j_store: Neo4jStore, datasets_dir: Path, tmp_path: Path
) -> None:
    lines = (datasets_dir / "fb15k-237" / "train.txt").read_text().splitlines()[:12_000]
    subset = tmp_path / "train.txt"
    subset.write_text("\n".join(lines) + "\n")
    raw = set(DelimitedTriples((subset,)))
    graph = neo4j_server.graph("killed")

    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_LOAD, neo4j_server.uri, neo4j_server.user, neo4j_server.password,
         graph, str(subset)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert child.stdout is not None
    batches = 0
    for line in child.stdout:
        assert not line.startswith("finished"), "the load ended before it could be killed"
        batches += line.startswith("batch")
        if batches >= 10:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()

    info = neo4j_store.graph_info(graph)
    assert info is not None and info.status == "loading"
    with pytest.raises(GraphIncompleteError, match="interrupted load"):
        neo4j_store.require_graph(graph, complete=True)
    partial = neo4j_store.run("count_triples", graph)[0]["n"]
    assert 0 < partial < len(raw)

    # the rerun (no --replace needed: the graph is not complete) discards and reloads
    info = neo4j_store.load(graph, DelimitedTriples((subset,)), dataset="fb15k-237")
    assert info.status == "complete" and info.triples == len(raw)
    stored = list(neo4j_store.triples(graph))
    assert len(stored) == len(set(stored)) and set(stored) == raw
    stats = neo4j_store.stats(graph)
    assert stats.entities == len({t.head for t in raw} | {t.tail for t in raw})
    # and loading the same input again over it changes nothing
    neo4j_store.load(graph, DelimitedTriples((subset,)), dataset="fb15k-237", replace=True)
    assert neo4j_store.stats(graph) == stats
    neo4j_store.drop(graph)


def test_load_reports_progress(neo4j_server: Neo4jServer, neo4j_store: Neo4jStore) -> None:
    class Recorder(Reporter):
        def __init__(self) -> None:
            super().__init__()
            self.advanced, self.totals = 0, []

        def advance(self, n: int = 1) -> None:
            self.advanced += n

        def update(self, *, total: int | None = None, description: str | None = None) -> None:
            if total is not None:
                self.totals.append(total)

    triples = [Triple(f"e{i}", f"r{i % 3}", f"e{i + 1}") for i in range(2_500)]
    recorder = Recorder()
    graph = neo4j_server.graph("progress")
    with neo4j_server.store(batch_size=1_000) as store:
        store.load(graph, triples, dataset="chain", replace=True, progress=recorder)
    assert recorder.totals == [2_500] and recorder.advanced == 2_500
    neo4j_store.drop(graph)


def test_routing_uri_scheme(neo4j_server: Neo4jServer, family_neo4j: dict[str, str]) -> None:
    """neo4j:// (routing: what clusters and Aura use) against the same server."""
    uri = neo4j_server.uri.replace("bolt://", "neo4j://", 1)
    with Neo4jStore(uri, auth=neo4j_server.auth) as store:
        assert store.stats(family_neo4j["family-facts"]).triples == 17_615
