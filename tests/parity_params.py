"""Parameters for the parity test (tests/test_parity.py): one entry per named query.

Every query twin (``sparql/NAME.rq`` + ``cypher/NAME.cypher``) must have an entry, or the
parity test fails: a new twin cannot be skipped silently. An entry maps the query name to a
function of a :class:`Sample` of the graph under test returning the parameter sets to run
it with (``[{}]`` for a query without parameters). Use :class:`kgengine.model.Entity` /
:class:`kgengine.model.Relation` for KG terms, lists for ``VALUES`` / ``UNWIND`` params.
A case may instead be a function ``(store, graph) -> rows``, for a template query that its
module fills per backend (``run_template``); it is called on both stores.

To add a query: ``PARAMS["my_query"] = lambda s: [{"r": Relation(s.relations[0])}]``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kgengine.model import Entity, Relation


@dataclass(frozen=True)
class Sample:
    """Deterministic picks from one graph: entities (the most connected first, then a few
    seeded random ones) and every relation (most frequent first)."""

    graph: str
    entities: tuple[str, ...]
    relations: tuple[str, ...]


Rows = list[dict[str, Any]]
Case = dict[str, Any] | Callable[[Any, str], Rows]
Params = list[Case]
NO_PARAMS: Callable[[Sample], Params] = lambda s: [{}]  # noqa: E731


def _entities(s: Sample, n: int = 8) -> list[Entity]:
    return [Entity(e) for e in s.entities[:n]]


def _grounding_cases(s: Sample) -> Params:
    """Hierarchy, symmetry and composition rules over the sample's relations, with the head
    required, excluded and ignored; one with a limit (ordered, so the same rows survive)."""
    from kgengine.mining.groundings import HeadFilter, groundings
    from kgengine.mining.rules import Atom, Rule

    r = (s.relations * 3)[:3]
    rules = [
        Rule.of([Atom(r[1], "?a", "?b")], Atom(r[0], "?a", "?b")),
        Rule.of([Atom(r[0], "?b", "?a")], Atom(r[0], "?a", "?b")),
        Rule.of([Atom(r[0], "?a", "?c"), Atom(r[1], "?c", "?b")], Atom(r[2], "?a", "?b")),
    ]
    cases: Params = []
    for rule in rules:
        for head in HeadFilter:
            def case(store: Any, graph: str, rule: Rule = rule, head: HeadFilter = head) -> Rows:
                return groundings(store, graph, rule, head=head)

            cases.append(case)

    def limited(store: Any, graph: str) -> Rows:
        return groundings(store, graph, rules[-1], head=HeadFilter.WITH, limit=25)

    cases.append(limited)
    return cases


def _mining_cases(query: str) -> Callable[[Sample], Params]:
    """Rule-mining count queries, filled per backend by kgengine.mining.query_engine: partial
    rules over the sample's relations (head only, a dangling atom, an inverse atom, a path) with
    every kind of candidate atom, capped and uncapped body sizes, and constants."""

    def build(s: Sample) -> Params:
        from kgengine.mining.query_engine import QueryEngine
        from kgengine.mining.rules import Atom
        from kgengine.mining.search import FRESH, is_closed

        r = (s.relations * 3)[:3]
        head = Atom(r[0], "?a", "?b")
        rules = [(head,), (head, Atom(r[1], "?a", "?f")), (head, Atom(r[1], "?b", "?a")),
                 (head, Atom(r[1], "?a", "?f"), Atom(r[2], "?f", "?b"))]

        def candidates(store: Any, graph: str) -> Rows:
            engine, rows = QueryEngine(store, graph), []
            for i, atoms in enumerate(rules):
                names = sorted({v for a in atoms for v in a.variables})
                shapes = [(x, y) for x in names for y in names if x != y]
                shapes += [(x, FRESH) for x in names] + [(FRESH, x) for x in names]
                for j, counts in enumerate(engine.refinement_counts(atoms, shapes)):
                    rows += [{"rule": i, "shape": j, "rel": k, "support": n} for k, n in counts.items()]
            return rows

        def sizes(store: Any, graph: str) -> Rows:
            engine, rows = QueryEngine(store, graph), []
            for i, atoms in enumerate(a for a in rules if len(a) > 1 and is_closed(a)):
                for cap in (None, 2):
                    for side in (True, False):
                        n = (engine.pca_body_size(atoms, side, cap) if query == "mine_pca_body_size"
                             else engine.body_size(atoms, cap))
                        rows.append({"rule": i, "cap": cap, "side": side, "n": n})
            return rows

        def constants(store: Any, graph: str) -> Rows:
            engine = QueryEngine(store, graph)
            counts = engine.constant_counts(rules[1], "?f", "?a")
            return [{"entity": e, "support": n} for e, n in counts.items()]

        if query == "mine_candidate_support":
            return [candidates]
        if query in ("mine_body_size", "mine_pca_body_size"):
            return [sizes]
        return [constants]

    return build


PARAMS: dict[str, Callable[[Sample], Params]] = {
    "all_triples": NO_PARAMS,
    "count_entities": NO_PARAMS,
    "count_triples": NO_PARAMS,
    "degree_histogram": NO_PARAMS,
    "entities": NO_PARAMS,
    "entity_labels": NO_PARAMS,
    "entity_private_ids": NO_PARAMS,
    "relation_labels": NO_PARAMS,
    "relation_counts": NO_PARAMS,
    # one entity, several, none, and one that is not in the graph
    "edges_out": lambda s: [
        {"h": _entities(s, 1)}, {"h": _entities(s)}, {"h": []}, {"h": [Entity("no such entity")]},
    ],
    "edges_in": lambda s: [
        {"t": _entities(s, 1)}, {"t": _entities(s)}, {"t": []}, {"t": [Entity("no such entity")]},
    ],
    # hub-capped one-hop queries of k-hop retrieval (kgengine.rag.retrieval): a cap that
    # cuts the most connected entities, one that keeps everything, one that keeps nothing
    "rag_edges_out_capped": lambda s: [
        {"h": _entities(s), "cap": cap} for cap in (2, 1_000_000, 0)
    ] + [{"h": [], "cap": 5}],
    "rag_edges_in_capped": lambda s: [
        {"t": _entities(s), "cap": cap} for cap in (2, 1_000_000, 0)
    ] + [{"t": [], "cap": 5}],
    # relation search of Think-on-Graph (kgengine.rag.tog): one entity, several, none, unknown
    "entity_relations_out": lambda s: [
        {"h": _entities(s, 1)}, {"h": _entities(s)}, {"h": []}, {"h": [Entity("no such entity")]},
    ],
    "entity_relations_in": lambda s: [
        {"t": _entities(s, 1)}, {"t": _entities(s)}, {"t": []}, {"t": [Entity("no such entity")]},
    ],
    "rule_groundings": _grounding_cases,
    # one step of a relation path (kgengine.rag.offline): several entities and relations, an
    # entity that is not in the graph, a relation that is not either
    "answer_step_out": lambda s: [
        {"h": _entities(s), "r": Relation(r)} for r in s.relations[:3]
    ] + [{"h": [Entity("no such entity")], "r": Relation(s.relations[0])},
         {"h": _entities(s), "r": Relation("no such relation")}],
    "answer_step_in": lambda s: [
        {"t": _entities(s), "r": Relation(r)} for r in s.relations[:3]
    ] + [{"t": [Entity("no such entity")], "r": Relation(s.relations[0])},
         {"t": _entities(s), "r": Relation("no such relation")}],
    # entity search (kgengine.rag.linking): ids that exist and one that does not; search
    # texts that are private ids, label prefixes (lower-cased, as the caller passes them)
    "entity_degrees": lambda s: [{"e": _entities(s)}, {"e": [Entity("no such entity")]}, {"e": []}],
    "entity_lookup": lambda s: [{"e": _entities(s)}, {"e": [Entity("no such entity")]}, {"e": []}],
    "entity_search": lambda s: [{"text": t} for t in ("e0", "e00001", "a", "zzz no such label", "")]
    + [{"text": e.lower()[:2]} for e in s.entities[:2]],
    "relation_triples": lambda s: [{"r": Relation(r)} for r in s.relations[:5]]
    + [{"r": Relation("no such relation")}],
    "mine_relation_stats": NO_PARAMS,
    "mine_candidate_support": _mining_cases("mine_candidate_support"),
    "mine_body_size": _mining_cases("mine_body_size"),
    "mine_pca_body_size": _mining_cases("mine_pca_body_size"),
    "mine_constant_support": _mining_cases("mine_constant_support"),
    "mine_distinct_values": _mining_cases("mine_distinct_values"),
}
