"""Store protocol on a real Neo4j (tests/neo4j_server.py starts one), checked against counts
computed independently from the raw files with plain Python, as tests/test_store_oxigraph.py
does for Oxigraph; plus the faults: unreachable server, wrong password, hostile relation
names, a load killed half-way."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kgengine.errors import GraphExistsError, InputError, KGEngineError, StoreError
from kgengine.loaders.base import DelimitedTriples
from kgengine.model import Direction, Entity, Relation, Triple
from kgengine.neo4j_store import Neo4jStore, relationship_type, render
from kgengine.progress import Reporter
from kgengine.store import assign_private_ids, open_store
from neo4j_server import Neo4jServer
from test_store_oxigraph import _raw_family

pytestmark = pytest.mark.neo4j

# names a naive implementation would paste into Cypher and break on (or be injected by)
HOSTILE_RELATIONS = [
    "a`b",
    "``",
    "with space",
    "x })-[:y]->(z) //",
    "'single' \"double\"",
    "{{body}}",
    "{{rel:r}}",
    "$graph",
    "new\nline",
    "ünï/code#frag?x=1",
    "/film/film/genre",
    "DETACH DELETE",
]


def python_bfs(triples: set[Triple], seed: str, hops: int, direction: Direction) -> set[Triple]:
    out_edges: dict[str, list[Triple]] = {}
    in_edges: dict[str, list[Triple]] = {}
    for t in triples:
        out_edges.setdefault(t.head, []).append(t)
        in_edges.setdefault(t.tail, []).append(t)
    frontier, seen, found = {seed}, {seed}, set()
    for _ in range(hops):
        nxt = set()
        for e in frontier:
            if direction in (Direction.OUT, Direction.BOTH):
                for t in out_edges.get(e, []):
                    found.add(t)
                    nxt.add(t.tail)
            if direction in (Direction.IN, Direction.BOTH):
                for t in in_edges.get(e, []):
                    found.add(t)
                    nxt.add(t.head)
        frontier = nxt - seen
        seen |= nxt
    return found


# ---- the protocol on Family -----------------------------------------------------------------
def test_family_counts_match_raw_files(neo4j_store: Neo4jStore, neo4j_family: dict[str, str]) -> None:
    raw = _raw_family(["facts", "train", "valid", "test"])
    stats = neo4j_store.stats(neo4j_family["family"])
    assert stats.triples == len(raw) == 28_356
    assert stats.relations == 12
    assert stats.entities == len({t.head for t in raw} | {t.tail for t in raw})
    assert stats.per_relation == dict(Counter(t.relation for t in raw))
    degree: Counter[str] = Counter()
    for t in raw:
        degree[t.head] += 1
        degree[t.tail] += 1
    assert stats.degree_histogram == dict(Counter(degree.values()))


def test_graph_variants_are_kept_apart(neo4j_store: Neo4jStore, neo4j_family: dict[str, str]) -> None:
    facts = neo4j_family["family-facts"]
    assert neo4j_store.stats(facts).triples == 17_615
    assert set(neo4j_store.triples(facts)) == _raw_family(["facts"])
    infos = {g.name: g for g in neo4j_store.graphs()}
    assert infos[facts].status == "complete"
    assert infos[facts].splits == ("facts",)
    assert infos[neo4j_family["family"]].triples == 28_356


def test_neighbourhood_matches_python_bfs(neo4j_store: Neo4jStore, neo4j_family: dict[str, str]) -> None:
    raw = _raw_family(["facts"])
    for seed in ["7", "143", "2115"]:
        for hops in (1, 2, 3):
            for direction in Direction:
                got = neo4j_store.neighbourhood(neo4j_family["family-facts"], seed, hops, direction)
                assert set(got) == python_bfs(raw, seed, hops, direction), (seed, hops, direction)
                assert len(got) == len(set(got))


def test_parameters_are_values_not_text(neo4j_store: Neo4jStore, neo4j_family: dict[str, str]) -> None:
    graph = neo4j_family["family-facts"]
    hostile = Entity("7'}) DETACH DELETE (n) //")
    assert neo4j_store.run("edges_out", graph, h=[hostile]) == []
    rows = neo4j_store.run("edges_out", graph, h=[Entity("7")])
    assert {(r["h"], r["r"], r["t"]) for r in rows} == {
        tuple(t) for t in _raw_family(["facts"]) if t.head == "7"
    }


def test_private_ids_are_the_seeded_mapping(neo4j_store: Neo4jStore, neo4j_family: dict[str, str]) -> None:
    ids = neo4j_store.private_ids(neo4j_family["family"])
    raw = _raw_family(["facts", "train", "valid", "test"])
    assert ids == assign_private_ids({t.head for t in raw} | {t.tail for t in raw}, seed=0)


def test_existing_graph_refused_and_bad_input_keeps_it(
    neo4j_server: Neo4jServer, neo4j_store: Neo4jStore, tmp_path: Path
) -> None:
    graph = neo4j_server.graph("refuse")
    good = [Triple("a", "r", "b"), Triple("b", "r", "c")]
    neo4j_store.load(graph, good, dataset="tiny", replace=True)
    with pytest.raises(GraphExistsError):
        neo4j_store.load(graph, good, dataset="tiny")
    bad_file = tmp_path / "bad.tsv"
    bad_file.write_text("x\tr\ty\nbroken line\n")
    with pytest.raises(InputError):
        neo4j_store.load(graph, DelimitedTriples((bad_file,)), dataset="tiny", replace=True)
    with pytest.raises(KGEngineError, match="NUL"):
        neo4j_store.load(graph, [Triple("x", "bad\x00name", "y")], dataset="tiny", replace=True)
    assert set(neo4j_store.triples(graph)) == set(good)
    assert neo4j_store.graph_info(graph).status == "complete"
    neo4j_store.drop(graph)
    assert neo4j_store.graph_info(graph) is None
    assert neo4j_store.run("count_entities", graph) == [{"n": 0}]


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


def test_hostile_relation_names_round_trip(neo4j_server: Neo4jServer, neo4j_store: Neo4jStore) -> None:
    graph = neo4j_server.graph("hostile")
    triples = {Triple(f"h{i}", name, f"t{i}") for i, name in enumerate(HOSTILE_RELATIONS)}
    triples.add(Triple("h0", "a`b", "h0"))  # a self-loop too
    neo4j_store.load(graph, sorted(triples), dataset="hostile", replace=True)
    assert set(neo4j_store.triples(graph)) == triples
    assert neo4j_store.stats(graph).per_relation == dict(Counter(t.relation for t in triples))
    for name in HOSTILE_RELATIONS:
        rows = neo4j_store.run("relation_triples", graph, r=Relation(name))
        assert {Triple(r["h"], r["r"], r["t"]) for r in rows} == {t for t in triples if t.relation == name}
    neo4j_store.drop(graph)


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
        assert time.monotonic() - started < 20, port


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


def test_routing_uri_scheme(neo4j_server: Neo4jServer, neo4j_family: dict[str, str]) -> None:
    """neo4j:// (routing: what clusters and Aura use) against the same server."""
    uri = neo4j_server.uri.replace("bolt://", "neo4j://", 1)
    with Neo4jStore(uri, auth=neo4j_server.auth) as store:
        assert store.stats(neo4j_family["family-facts"]).triples == 17_615
