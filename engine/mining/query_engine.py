"""The ``query`` counting engine: every count the miner needs is a named query run by the
store's own engine (SPARQL on Oxigraph, Cypher on Neo4j).

The query files (``sparql/mine_*.rq``, ``cypher/mine_*.cypher``) hold the counting query; this
module fills their ``{{placeholders}}`` with the rule's patterns, generated and escaped by
:mod:`kgengine.mining.compile` for the store's ``query_language``:

- ``mine_relation_stats``: facts, distinct subjects / objects per relation;
- ``mine_candidate_support``: for a partial rule plus an atom with a *variable* relation, the
  support of every relation in one ``GROUP BY`` query;
- ``mine_body_size`` / ``mine_pca_body_size``: distinct head bindings of the body (with the
  head relation on the functional side for PCA), with an optional ``LIMIT`` for AMIE's lazy
  counting;
- ``mine_constant_support`` / ``mine_distinct_values``: instantiated atoms (``--constants``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kgengine.mining.compile import (
    cypher_candidate,
    cypher_typed_patterns,
    query_variable,
    sparql_candidate,
    sparql_patterns,
    sparql_term,
)
from kgengine.mining.counting import FRESH
from kgengine.mining.measures import RelationStats
from kgengine.mining.rules import Atom, is_variable
from kgengine.store import KGStore

NEW_VARIABLE = "?cand_new"  # the fresh variable of a dangling candidate (never a rule variable)
VALUE_VARIABLE = "?cand_value"  # the variable counted per entity for instantiated atoms
PCA_VARIABLE = "?pca_other"  # the existential head argument of the PCA body


class QueryEngine:
    """Counting engine over a store's query engine (``kgengine.mining.search.CountingEngine``)."""

    name = "query"

    def __init__(self, store: KGStore, graph: str) -> None:
        self.store = store
        self.graph = graph
        self.language = store.query_language
        if self.language not in ("sparql", "cypher"):
            raise ValueError(f"unknown query language {self.language!r}")
        self.queries = 0  # statistics only (not exact under threads)

    def _run(self, name: str, parts: dict[str, str], params: dict[str, Any]) -> list[dict[str, Any]]:
        # both stores are safe to share between threads (Oxigraph's store, the Neo4j driver)
        self.queries += 1
        return self.store.run_template(name, self.graph, parts, **params)

    # -- protocol ------------------------------------------------------------------------------
    def relation_stats(self) -> dict[str, RelationStats]:
        rows = self.store.run("mine_relation_stats", self.graph)
        return {
            row["r"]: RelationStats(int(row["facts"]), int(row["subjects"]), int(row["objects"]))
            for row in rows
        }

    def refinement_counts(
        self, atoms: Sequence[Atom], shapes: Sequence[tuple[str, str]], min_support: int = 0
    ) -> list[dict[str, int]]:
        # every relation is counted (one GROUP BY query per shape); the miner filters
        out = []
        for subject, obj in shapes:
            subject = NEW_VARIABLE if subject == FRESH else subject
            obj = NEW_VARIABLE if obj == FRESH else obj
            parts, params = self._parts(atoms[0], list(atoms[1:]))
            if self.language == "sparql":
                parts["candidate"] = sparql_candidate(subject, obj)
            else:
                parts["candidate"] = cypher_candidate(atoms, subject, obj)
            rows = self._run("mine_candidate_support", parts, params)
            out.append({row["cand_rel"]: int(row["support"]) for row in rows})
        return out

    def body_size(self, atoms: Sequence[Atom], cap: int | None = None) -> int:
        parts, params = self._parts(atoms[0], list(atoms[1:]), with_head=False, limit=cap)
        return int(self._run("mine_body_size", parts, params)[0]["n"])

    def pca_body_size(self, atoms: Sequence[Atom], subject_side: bool, cap: int | None = None) -> int:
        head = atoms[0]
        parts, params = self._parts(head, list(atoms[1:]), with_head=False, limit=cap)
        if is_variable(head.subject) and is_variable(head.object):
            existential = (Atom(head.relation, head.subject, PCA_VARIABLE) if subject_side
                           else Atom(head.relation, PCA_VARIABLE, head.object))
        elif is_variable(head.subject):  # r(x, C): x has some r fact
            existential = Atom(head.relation, head.subject, PCA_VARIABLE)
        else:
            existential = Atom(head.relation, PCA_VARIABLE, head.object)
        if self.language == "sparql":
            parts["existential"] = sparql_patterns([existential])
        else:
            known = query_variable(existential.subject if existential.object == PCA_VARIABLE
                                  else existential.object)
            pattern = (f"({known})-[pca_rel]->()" if existential.object == PCA_VARIABLE
                       else f"()-[pca_rel]->({known})")
            parts["existential"] = (f"WITH * WHERE EXISTS {{ MATCH {pattern} "
                                    "WHERE type(pca_rel) = $pca_type }")
            params["pca_type"] = head.relation
        return int(self._run("mine_pca_body_size", parts, params)[0]["n"])

    def constant_counts(
        self, atoms: Sequence[Atom], variable: str, join: str, min_support: int = 1
    ) -> dict[str, int]:
        renamed = [a.rename({variable: VALUE_VARIABLE}) for a in atoms]
        parts, params = self._parts(renamed[0], renamed[1:])
        rows = self._run("mine_constant_support", parts, params)
        out = {}
        for row in rows:
            if int(row["support"]) < min_support:
                continue
            constant = str(row["cand_value"])
            fixed = [a.rename({variable: constant, join: VALUE_VARIABLE}) for a in atoms]
            parts, params = self._parts(fixed[0], fixed[1:])
            if int(self._run("mine_distinct_values", parts, params)[0]["n"]) >= 2:
                out[constant] = int(row["support"])
        return out

    # -- patterns ------------------------------------------------------------------------------
    def _parts(
        self, head: Atom, body: list[Atom], *, with_head: bool = True, limit: int | None = None
    ) -> tuple[dict[str, str], dict[str, Any]]:
        head_vars = [v for v in head.terms if is_variable(v)]
        if self.language == "sparql":
            parts = {
                "head_vars": " ".join(sparql_term(v) for v in dict.fromkeys(head_vars)),
                "head": sparql_patterns([head]) if with_head else "",
                "body": sparql_patterns(body),
                "limit": f"LIMIT {int(limit)}" if limit is not None else "",
            }
            return parts, {}
        atoms = [head, *body] if with_head else body
        # relationship types as parameters: one query text (one Neo4j plan) per rule shape
        clauses, params = cypher_typed_patterns(atoms)
        if with_head:
            first, _, rest = clauses.partition("\n")
            parts = {"head": first, "body": rest}
        else:
            parts = {"head": "", "body": clauses}
        parts["head_vars"] = ", ".join(query_variable(v) for v in dict.fromkeys(head_vars))
        parts["limit"] = "LIMIT $limit" if limit is not None else ""
        if limit is not None:
            params["limit"] = int(limit)
        return parts, params
