"""Store protocol on the Oxigraph backend, checked against counts computed independently
from the raw files with plain Python."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from kgengine.loaders.family import bundled_path
from kgengine.model import Direction, Entity, Triple


def _raw_family(splits: list[str]) -> set[Triple]:
    out = set()
    for split in splits:
        for line in (Path(bundled_path()) / f"{split}.txt").read_text().splitlines():
            h, r, t = line.split("\t")
            out.add(Triple(h, r, t))
    return out


def test_family_counts_match_raw_files(family_store) -> None:
    raw = _raw_family(["facts", "train", "valid", "test"])
    stats = family_store.stats("family")
    assert stats.triples == len(raw) == 28_356
    assert stats.relations == 12
    assert stats.entities == len({t.head for t in raw} | {t.tail for t in raw})
    assert stats.per_relation == dict(Counter(t.relation for t in raw))
    degree = Counter()
    for t in raw:
        degree[t.head] += 1
        degree[t.tail] += 1
    assert stats.degree_histogram == dict(Counter(degree.values()))


def test_facts_only_graph(family_store) -> None:
    assert family_store.stats("family-facts").triples == 17_615
    assert set(family_store.triples("family-facts")) == _raw_family(["facts"])


def test_neighbourhood_matches_python_bfs(family_store) -> None:
    raw = _raw_family(["facts"])
    out_edges: dict[str, list[Triple]] = {}
    in_edges: dict[str, list[Triple]] = {}
    for t in raw:
        out_edges.setdefault(t.head, []).append(t)
        in_edges.setdefault(t.tail, []).append(t)

    def expected(seed: str, hops: int, direction: Direction) -> set[Triple]:
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

    for seed in ["7", "143", "2115"]:
        for hops in (1, 2, 3):
            for direction in Direction:
                got = family_store.neighbourhood("family-facts", seed, hops, direction)
                assert set(got) == expected(seed, hops, direction), (seed, hops, direction)
                assert len(got) == len(set(got))


def test_named_query_parameters_are_values_not_text(family_store) -> None:
    # an entity id full of SPARQL syntax is just a value that matches nothing
    hostile = Entity('7> } ; DROP ALL ; SELECT * { ?s ?p ?o')
    assert family_store.run("edges_out", "family-facts", h=[hostile]) == []
    rows = family_store.run("edges_out", "family-facts", h=[Entity("7")])
    assert {(r["h"], r["r"], r["t"]) for r in rows} == {
        tuple(t) for t in _raw_family(["facts"]) if t.head == "7"
    }


def test_private_ids_are_seeded_and_persisted(family_store) -> None:
    ids = family_store.private_ids("family")
    assert len(ids) == family_store.stats("family").entities
    assert len(set(ids.values())) == len(ids)
    # the mapping is not the identity or the sort order of the ids
    assert sum(1 for e, p in ids.items() if p.lstrip("e0") == e) < 10
