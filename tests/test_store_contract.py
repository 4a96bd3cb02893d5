"""The store protocol (kgengine.store.KGStore), one suite run on every backend: an on-disk
Oxigraph store and a real Neo4j (tests/neo4j_server.py). A new store operation is tested
on both by writing its test here once. Expectations come from the raw files read with
plain Python (tests/store_oracles.py), never from a backend.

Backend-specific behaviour (Neo4j faults and credentials, Oxigraph's bulk-load paths) is
in tests/test_neo4j_store.py, tests/test_load_store.py and tests/test_load_cli.py."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.kinds import KindCases
from kgengine.errors import GraphExistsError, GraphNotFoundError, InputError, KGEngineError
from kgengine.loaders.base import DelimitedTriples
from kgengine.model import Direction, Entity, Relation, Triple
from kgengine.store import BACKENDS, KGStore, assign_private_ids, read_workers, resolve_graph
from store_oracles import python_bfs, raw_family

# names a naive implementation would paste into SPARQL or Cypher and break on (or be injected by)
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
    "> } ; DROP ALL ; SELECT * { ?s ?p ?o",
]


@dataclass(frozen=True)
class Subject:
    """A backend under test: ``store`` holds the bundled Family KG as graphs ``family``
    (all splits) and ``facts`` (facts.txt only); ``scratch`` is a store tests may write
    to, in graphs named ``graph(name)``."""

    store: Any
    family: str
    facts: str
    scratch: Any
    prefix: str

    def graph(self, name: str) -> str:
        return self.prefix + name


def _oxigraph(request: pytest.FixtureRequest) -> Iterator[Subject]:
    store = request.getfixturevalue("family_oxigraph")
    yield Subject(store, "family", "family-facts", request.getfixturevalue("oxigraph_store"), "")


def _neo4j(request: pytest.FixtureRequest) -> Iterator[Subject]:
    server = request.getfixturevalue("neo4j_server")
    names = request.getfixturevalue("family_neo4j")
    store = request.getfixturevalue("neo4j_store")
    yield Subject(store, names["family"], names["family-facts"], store, server.graph("contract-"))
    for info in store.graphs():  # the scratch graphs of this test
        if info.name.startswith(server.graph("contract-")):
            store.drop(info.name)


@dataclass(frozen=True)
class BackendCase:
    """How the contract gets a backend's :class:`Subject` (from the fixtures of
    tests/conftest.py), and the marks its tests carry (a server it needs)."""

    subject: Callable[[pytest.FixtureRequest], Iterator[Subject]]
    marks: tuple[pytest.MarkDecorator, ...] = ()


BACKEND_CASES = KindCases[BackendCase](BACKENDS, {
    "oxigraph": BackendCase(_oxigraph),
    "neo4j": BackendCase(_neo4j, (pytest.mark.neo4j,)),
}, "tests/test_store_contract.py")


def _backend_params() -> list[Any]:
    """Every registered backend (one without a case fails its tests, saying so)."""
    cases = BACKEND_CASES.cases
    return [pytest.param(name, marks=cases[name].marks if name in cases else ())
            for name in BACKEND_CASES.registry.names()]


@pytest.fixture(params=_backend_params())
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    yield from BACKEND_CASES.case(request.param).subject(request)


def test_resolve_graph_takes_the_only_graph_and_refuses_empty_ones(tmp_path: Path) -> None:
    from kgengine.oxigraph.store import OxigraphStore  # a store of its own: one graph only

    with OxigraphStore(str(tmp_path / "store")) as store:
        with pytest.raises(KGEngineError, match="graphs in .*: none"):
            resolve_graph(store, None)
        store.load("only", [Triple("a", "r", "b")], dataset="tiny")
        assert resolve_graph(store, None) == "only"
        store.load("empty", [], dataset="tiny")
        with pytest.raises(KGEngineError, match="'empty' has no triples"):
            resolve_graph(store, "empty")


# ---- a user's own query ------------------------------------------------------------------------
COUNT_FACTS = {
    "sparql": "SELECT (COUNT(*) AS ?n) WHERE { ?h ?r ?t }",
    "cypher": "MATCH (:Entity {graph: $graph})-[x]->() RETURN count(x) AS n",
}
NOT_A_QUERY = "SELECT WHERE nonsense {"


class TestBackendContract:
    """The store protocol on every registered backend (``subject``)."""

    def test_is_a_kgstore(self, subject: Subject) -> None:
        assert isinstance(subject.store, KGStore)
        assert subject.store.query_language in ("sparql", "cypher")

    # ---- reading the Family KG ---------------------------------------------------------------------
    def test_family_counts_match_raw_files(self, subject: Subject) -> None:
        raw = raw_family(["facts", "train", "valid", "test"])
        stats = subject.store.stats(subject.family)
        assert stats.triples == len(raw) == 28_356
        assert stats.relations == 12
        assert stats.entities == len({t.head for t in raw} | {t.tail for t in raw})
        assert stats.per_relation == dict(Counter(t.relation for t in raw))
        degree: Counter[str] = Counter()
        for t in raw:
            degree[t.head] += 1
            degree[t.tail] += 1
        assert stats.degree_histogram == dict(Counter(degree.values()))

    def test_graph_variants_are_kept_apart(self, subject: Subject) -> None:
        store = subject.store
        assert store.stats(subject.facts).triples == 17_615
        assert set(store.triples(subject.facts)) == raw_family(["facts"])
        infos = {g.name: g for g in store.graphs()}
        assert infos[subject.facts].status == "complete"
        assert infos[subject.facts].splits == ("facts",)
        assert infos[subject.family].triples == 28_356
        assert store.graph_info(subject.facts) == infos[subject.facts]

    def test_neighbourhood_matches_python_bfs(self, subject: Subject) -> None:
        raw = raw_family(["facts"])
        for seed in ["7", "143", "2115"]:
            for hops in (1, 2, 3):
                for direction in Direction:
                    got = subject.store.neighbourhood(subject.facts, seed, hops, direction)
                    assert set(got) == python_bfs(raw, seed, hops, direction), (seed, hops, direction)
                    assert len(got) == len(set(got))

    def test_named_query_parameters_are_values_not_text(self, subject: Subject) -> None:
        # entity ids full of SPARQL / Cypher syntax are just values that match nothing
        for hostile in ('7> } ; DROP ALL ; SELECT * { ?s ?p ?o', "7'}) DETACH DELETE (n) //"):
            assert subject.store.run("edges_out", subject.facts, h=[Entity(hostile)]) == []
        rows = subject.store.run("edges_out", subject.facts, h=[Entity("7")])
        assert {(r["h"], r["r"], r["t"]) for r in rows} == {
            tuple(t) for t in raw_family(["facts"]) if t.head == "7"
        }

    def test_private_ids_are_the_seeded_mapping(self, subject: Subject) -> None:
        ids = subject.store.private_ids(subject.family)
        raw = raw_family(["facts", "train", "valid", "test"])
        assert ids == assign_private_ids({t.head for t in raw} | {t.tail for t in raw}, seed=0)
        assert len(set(ids.values())) == len(ids) == subject.store.stats(subject.family).entities
        # the mapping is not the identity or the sort order of the ids
        assert sum(1 for e, p in ids.items() if p.lstrip("e0") == e) < 10

    def test_family_has_no_labels(self, subject: Subject) -> None:
        assert subject.store.labels(subject.family) == {}
        assert subject.store.relation_labels(subject.family) == {}

    # ---- graphs by name ----------------------------------------------------------------------------
    def test_require_graph_and_resolve_graph(self, subject: Subject) -> None:
        store = subject.store
        assert store.require_graph(subject.facts, complete=True).triples == 17_615
        with pytest.raises(GraphNotFoundError, match=subject.facts) as missing:
            store.require_graph(subject.graph("no-such-graph"))
        assert "no-such-graph" in str(missing.value)  # names the graph asked for and those there are
        for operation in (store.stats, store.drop):
            with pytest.raises(GraphNotFoundError):
                operation(subject.graph("no-such-graph"))
        assert resolve_graph(store, subject.facts) == subject.facts
        with pytest.raises(KGEngineError, match="choose a graph with --graph"):
            resolve_graph(store, None)  # several graphs: the command must be told which

    # ---- writing -----------------------------------------------------------------------------------
    def test_existing_graph_refused_and_bad_input_keeps_it(self, subject: Subject, tmp_path: Path) -> None:
        store, graph = subject.scratch, subject.graph("refuse")
        good = [Triple("a", "r", "b"), Triple("b", "r", "c")]
        store.load(graph, good, dataset="tiny", replace=True)
        with pytest.raises(GraphExistsError):
            store.load(graph, good, dataset="tiny")
        bad_file = tmp_path / "bad.tsv"
        bad_file.write_text("x\tr\ty\nbroken line\n")
        with pytest.raises(InputError, match="bad.tsv:2"):
            store.load(graph, DelimitedTriples((bad_file,)), dataset="tiny", replace=True)
        assert set(store.triples(graph)) == set(good)
        assert store.graph_info(graph).status == "complete"
        store.drop(graph)
        assert store.graph_info(graph) is None
        assert store.run("count_entities", graph) == [{"n": 0}]

    def test_hostile_relation_names_round_trip(self, subject: Subject) -> None:
        store, graph = subject.scratch, subject.graph("hostile")
        triples = {Triple(f"h{i}", name, f"t{i}") for i, name in enumerate(HOSTILE_RELATIONS)}
        triples.add(Triple("h0", "a`b", "h0"))  # a self-loop too
        store.load(graph, sorted(triples), dataset="hostile", replace=True)
        assert set(store.triples(graph)) == triples
        assert store.stats(graph).per_relation == dict(Counter(t.relation for t in triples))
        for name in HOSTILE_RELATIONS:
            rows = store.run("relation_triples", graph, r=Relation(name))
            expected = {t for t in triples if t.relation == name}
            assert {Triple(r["h"], r["r"], r["t"]) for r in rows} == expected
        store.drop(graph)

    def test_labels_and_relation_labels_round_trip(self, subject: Subject) -> None:
        store, graph = subject.scratch, subject.graph("labels")
        triples = [Triple("a b", "with space", "c"), Triple("c", "a`b", "ü/ß"), Triple("ü/ß", "plain", "a b")]
        labels = [("a b", "A B"), ("c", "first"), ("c", "second"), ("nowhere", "not in the KG")]
        relation_labels = {"with space": 'has "a" space', "a`b": "back\ntick", "unused": "not in the KG"}
        store.load(graph, triples, dataset="tiny", labels=labels, relation_labels=relation_labels,
                   replace=True)
        # the first label of each entity / relation of the graph; others are not kept
        assert store.labels(graph) == {"a b": "A B", "c": "first"}
        assert store.relation_labels(graph) == {"with space": 'has "a" space', "a`b": "back\ntick"}
        # labels are not facts: counts and triples are the KG's alone
        assert set(store.triples(graph)) == set(triples)
        assert store.stats(graph).entities == 3
        # a reload without relation labels leaves none behind, and a drop removes every trace
        store.load(graph, triples, dataset="tiny", labels=labels, replace=True)
        assert store.relation_labels(graph) == {}
        assert store.labels(graph) == {"a b": "A B", "c": "first"}
        store.load(graph, triples, dataset="tiny", relation_labels=relation_labels, replace=True)
        store.drop(graph)
        assert store.relation_labels(graph) == {} and store.labels(graph) == {}

    def test_native_query_in_the_stores_language(self, subject: Subject) -> None:
        store = subject.store
        result = store.query(COUNT_FACTS[store.query_language], subject.facts)
        assert result.columns == ("n",) and int(result.rows[0][0]) == 17_615
        assert result.boolean is None
        with pytest.raises(KGEngineError):
            store.query(NOT_A_QUERY, subject.facts)
        with pytest.raises(GraphNotFoundError):
            store.query(COUNT_FACTS[store.query_language], subject.graph("no-such-graph"))

    # ---- thread safety -----------------------------------------------------------------------------
    def test_concurrent_reads_give_the_serial_results(self, subject: Subject) -> None:
        """What ``concurrent_reads`` promises: reads from several threads on one store object."""
        store = subject.store
        assert store.concurrent_reads  # both backends claim it; this test holds them to it
        assert read_workers(store) >= 1 and read_workers(store, 3) == 3
        seeds = ["7", "143", "2115", "8", "100", "2000", "61", "999"]

        def read(seed: str) -> tuple[frozenset[Triple], int, dict[str, str]]:
            found = store.neighbourhood(subject.facts, seed, 2, Direction.BOTH)
            rows = store.run("edges_out", subject.family, h=[Entity(seed)])
            return frozenset(found), len(rows), store.private_ids(subject.facts) if seed == "7" else {}

        serial = [read(seed) for seed in seeds]
        with ThreadPoolExecutor(4) as pool:
            for _ in range(3):
                assert list(pool.map(read, seeds)) == serial
