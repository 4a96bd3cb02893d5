"""k-hop candidate retrieval (kgengine.rag.retrieval) on both backends: hand-checked
neighbourhoods of a small movie KG with a hub, the hub cap policy, and an independent
in-memory breadth-first walk over the whole Family KG as the reference."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.toy_kg import triples
from kgengine.model import Direction, Question, Triple
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag.retrieval import KHopRetriever, RetrievalError

T = Triple
# Inception's neighbourhood (the KG-RAG paper's Figure 3, extended). 'Drama' is a hub
# (7 incoming has_genre), 'listy' has 5 outgoing triples, 'fan' reaches it in one hop.
MOVIES = [*triples("""
Inception | directed_by | Nolan
Inception | starred_actors | Hardy
Inception | release_year | 2010
Inception | has_genre | Drama
Warrior | starred_actors | Hardy
Warrior | has_genre | Drama
The Town | release_year | 2010
The Town | directed_by | Affleck
Dunkirk | directed_by | Nolan
Dunkirk | starred_actors | Hardy
"""),
    *(T(f"m{i}", "has_genre", "Drama") for i in range(1, 6)),
    T("fan", "likes", "listy"),
    *(T("listy", "lists", f"item{i}") for i in range(1, 6)),
]
LABELS = [("Inception", "Inception (2010 film)"), ("Nolan", "Christopher Nolan")]
HOP1 = {T("Inception", "directed_by", "Nolan"), T("Inception", "starred_actors", "Hardy"),
        T("Inception", "release_year", "2010"), T("Inception", "has_genre", "Drama")}
HOP2_CAPPED = {T("Dunkirk", "directed_by", "Nolan"), T("Warrior", "starred_actors", "Hardy"),
               T("Dunkirk", "starred_actors", "Hardy"), T("The Town", "release_year", "2010")}
DRAMA_IN = {T("Inception", "has_genre", "Drama"), T("Warrior", "has_genre", "Drama"),
            *(T(f"m{i}", "has_genre", "Drama") for i in range(1, 6))}


@pytest.fixture(params=["oxigraph", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def movies(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, str]]:
    if request.param == "oxigraph":
        store = OxigraphStore(str(tmp_path_factory.mktemp("movies") / "store"))
        store.load("movies", MOVIES, dataset="tsv", labels=LABELS)
        yield store, "movies"
        store.close()
    else:
        server = request.getfixturevalue("neo4j_server")
        store = request.getfixturevalue("neo4j_store")
        graph = server.graph("rag-movies")
        store.load(graph, MOVIES, dataset="tsv", labels=LABELS, replace=True)
        yield store, graph


def layers(movies: tuple[Any, str], entity: str, **options: Any) -> list[set[Triple]]:
    store, graph = movies
    return [set(layer) for layer in KHopRetriever(store, graph, **options).search_by_hop(entity)]


def test_one_hop_each_direction(movies: tuple[Any, str]) -> None:
    assert layers(movies, "Inception", hops=1, direction="out") == [HOP1]
    assert layers(movies, "Inception", hops=1, direction="in") == []
    assert layers(movies, "Nolan", hops=1, direction=Direction.IN) == [
        {T("Inception", "directed_by", "Nolan"), T("Dunkirk", "directed_by", "Nolan")}]
    assert layers(movies, "Inception", hops=1, direction="both") == [HOP1]


def test_outgoing_walk_stops_where_no_edges_leave(movies: tuple[Any, str]) -> None:
    # every object of Inception is a sink: hops 2 and 3 add nothing
    assert layers(movies, "Inception", hops=3, direction="out", hub_cap=None) == [HOP1]


def test_three_hops_both_directions_with_the_hub_cap(movies: tuple[Any, str]) -> None:
    # Drama (7 incoming) is over the cap of 3: kept as a leaf, its other movies not fetched;
    # Warrior is still reached through Hardy, so its own has_genre triple comes at hop 3
    assert layers(movies, "Inception", hops=3, hub_cap=3) == [
        HOP1, HOP2_CAPPED,
        {T("Warrior", "has_genre", "Drama"), T("The Town", "directed_by", "Affleck")},
    ]


def test_three_hops_without_the_cap(movies: tuple[Any, str]) -> None:
    assert layers(movies, "Inception", hops=3, hub_cap=None) == [
        HOP1, HOP2_CAPPED | (DRAMA_IN - HOP1), {T("The Town", "directed_by", "Affleck")},
    ]


def test_the_cap_is_inclusive_and_per_direction(movies: tuple[Any, str]) -> None:
    listed = {T("listy", "lists", f"item{i}") for i in range(1, 6)}
    liked = {T("fan", "likes", "listy")}
    # listy has 5 outgoing triples: expanded at a cap of 5, a leaf at 4
    assert layers(movies, "fan", hops=2, direction="out", hub_cap=5) == [liked, listed]
    assert layers(movies, "fan", hops=2, direction="out", hub_cap=4) == [liked]
    # Drama has 7 incoming and no outgoing triples: following outgoing edges it is no hub
    assert layers(movies, "Warrior", hops=2, direction="in", hub_cap=3) == []
    assert layers(movies, "m1", hops=2, direction="both", hub_cap=3) == [{T("m1", "has_genre", "Drama")}]
    assert layers(movies, "m1", hops=2, direction="both", hub_cap=7) == [
        {T("m1", "has_genre", "Drama")}, DRAMA_IN - {T("m1", "has_genre", "Drama")}]


def test_the_topic_entity_is_expanded_even_when_it_is_a_hub(movies: tuple[Any, str]) -> None:
    found = layers(movies, "Drama", hops=2, hub_cap=3)
    assert found[0] == DRAMA_IN
    # its neighbours are expanded where they have at most 3 edges that way: Warrior is,
    # Inception (4 outgoing) is not
    assert found[1] == {T("Warrior", "starred_actors", "Hardy")}


def test_order_and_max_triples(movies: tuple[Any, str]) -> None:
    store, graph = movies
    retriever = KHopRetriever(store, graph, hops=3, hub_cap=3)
    found = retriever.search(Question("who directed the films of Hardy?"), "Inception")
    assert found == sorted(HOP1) + sorted(HOP2_CAPPED) + sorted(
        {T("Warrior", "has_genre", "Drama"), T("The Town", "directed_by", "Affleck")})
    cut = KHopRetriever(store, graph, hops=3, hub_cap=3, max_triples=6).search(Question(""), "Inception")
    assert cut == found[:6]
    assert KHopRetriever(store, graph, hops=2).search(Question(""), "no such entity") == []


def test_bad_options() -> None:
    store = None
    with pytest.raises(RetrievalError, match="hops must be between 1 and 3"):
        KHopRetriever(store, "g", hops=4)
    with pytest.raises(RetrievalError, match="direction must be out, in or both"):
        KHopRetriever(store, "g", direction="sideways")
    with pytest.raises(RetrievalError, match="hub_cap"):
        KHopRetriever(store, "g", hub_cap=0)


# ---- against an independent walk over the whole graph ------------------------------------
def reference_walk(triples: list[Triple], entity: str, hops: int, direction: Direction,
                   hub_cap: int | None) -> list[set[Triple]]:
    """The documented policy written out over adjacency lists in memory."""
    out_edges: dict[str, list[Triple]] = defaultdict(list)
    in_edges: dict[str, list[Triple]] = defaultdict(list)
    for t in triples:
        out_edges[t.head].append(t)
        in_edges[t.tail].append(t)
    tables = {Direction.OUT: [out_edges], Direction.IN: [in_edges], Direction.BOTH: [out_edges, in_edges]}
    seen, found, frontier, result = {entity}, set(), {entity}, []
    for hop in range(hops):
        layer = set()
        for node in frontier:
            for table in tables[direction]:
                edges = table.get(node, [])
                if hop == 0 or hub_cap is None or len(edges) <= hub_cap:
                    layer.update(edges)
        layer -= found
        if not layer:
            break
        result.append(layer)
        found |= layer
        frontier = {e for t in layer for e in (t.head, t.tail)} - seen
        seen |= frontier
    return result


def family(request: pytest.FixtureRequest, backend: str) -> tuple[Any, str]:
    if backend == "oxigraph":
        return request.getfixturevalue("family_oxigraph"), "family-facts"
    return request.getfixturevalue("neo4j_store"), request.getfixturevalue("family_neo4j")["family-facts"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["oxigraph", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def test_family_neighbourhoods_match_an_independent_walk(
    request: pytest.FixtureRequest, backend: str
) -> None:
    store, graph = family(request, backend)
    triples = list(store.triples(graph))
    seeds = sorted({t.head for t in triples})[::97][:6]
    checked = 0
    for seed in seeds:
        for hops, direction, cap in [(1, Direction.BOTH, 5), (2, Direction.OUT, 6), (2, Direction.IN, None),
                                     (3, Direction.BOTH, 8), (3, Direction.BOTH, None)]:
            expected = reference_walk(triples, seed, hops, direction, cap)
            got = KHopRetriever(store, graph, hops=hops, direction=direction, hub_cap=cap).search_by_hop(seed)
            assert [set(layer) for layer in got] == expected, (seed, hops, direction, cap)
            checked += sum(len(layer) for layer in expected)
            if cap is None:  # uncapped: the store's own k-hop walk finds the same triples
                assert set(store.neighbourhood(graph, seed, hops, direction)) == set().union(*expected)
    assert checked > 1000  # the seeds reach real neighbourhoods, and the cap cut some
