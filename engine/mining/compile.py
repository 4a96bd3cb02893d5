"""Compile rule atoms into query patterns for both backends.

Only relation names, entity ids and variable names of *rules* reach these patterns, and each
is escaped for its language: relations and constants become IRIs made of percent-encoded,
IRI-safe characters (SPARQL) or backtick-escaped relationship types and ``$parameters``
(Cypher); variable names are checked against ``[a-z]\\w*``. Query *files* (``sparql/*.rq``,
``cypher/*.cypher``) hold the surrounding query, with ``{{placeholders}}`` for these
generated patterns."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kgengine import terms
from kgengine.mining.rules import Atom, is_variable
from kgengine.queries import relationship_type

_VAR = re.compile(r"\?([a-z]\w*)")


def query_variable(term: str) -> str:
    """A rule variable ``?name`` as the bare name used in query text (checked: ``[a-z]\\w*``)."""
    match = _VAR.fullmatch(term)
    if not match:
        raise ValueError(f"invalid rule variable {term!r} (expected ?name)")
    return match.group(1)


def sparql_term(term: str) -> str:
    if is_variable(term):
        return "?" + query_variable(term)
    return f"<{terms.entity_iri(term)}>"


def sparql_atom(atom: Atom) -> str:
    return f"{sparql_term(atom.subject)} <{terms.relation_iri(atom.relation)}> {sparql_term(atom.object)} ."


def sparql_patterns(atoms: Sequence[Atom]) -> str:
    """Basic graph pattern of the atoms (SPARQL's homomorphism semantics: two atoms may
    match the same triple, as in AMIE)."""
    return "\n  ".join(sparql_atom(a) for a in atoms)


def cypher_patterns(atoms: Sequence[Atom], graph_param: str = "graph") -> tuple[str, dict[str, Any]]:
    """One ``MATCH`` clause per atom, so that (as in SPARQL and AMIE) two atoms may bind the
    same relationship: Neo4j's relationship-uniqueness applies only within one MATCH.
    Constants become parameters ``$c0, $c1, …``; returns (clauses, parameters)."""
    declared: set[str] = set()
    params: dict[str, Any] = {}
    clauses = []

    def node(term: str) -> str:
        if not is_variable(term):
            key = f"c{len(params)}"
            params[key] = term
            return f"(:Entity {{graph: ${graph_param}, id: ${key}}})"
        name = query_variable(term)
        if name in declared:
            return f"({name})"
        declared.add(name)
        return f"({name}:Entity {{graph: ${graph_param}}})"

    for atom in atoms:
        rel = relationship_type(atom.relation)
        clauses.append(f"MATCH {node(atom.subject)}-[:{rel}]->{node(atom.object)}")
    return "\n".join(clauses), params


def cypher_typed_patterns(
    atoms: Sequence[Atom], graph_param: str = "graph", prefix: str = "t"
) -> tuple[str, dict[str, Any]]:
    """Like :func:`cypher_patterns`, but each relationship type is a parameter
    (``MATCH (a)-[rel0]->(b) WHERE type(rel0) = $t0``), so that every rule of one *shape* has
    the same query text. Rule mining runs thousands of count queries over different relations;
    Neo4j caches plans per query text, and compiling a new one costs far more (~0.5 s) than
    running it, so shared texts make the query engine usable on Neo4j."""
    if not atoms:
        return "", {}
    clauses, params = cypher_patterns([Atom("t", a.subject, a.object) for a in atoms], graph_param)
    out = []
    for i, (clause, atom) in enumerate(zip(clauses.split("\n"), atoms, strict=True)):
        key = f"{prefix}{i}"
        params[key] = atom.relation
        out.append(clause.replace("-[:`t`]->", f"-[rel{i}]->", 1) + f" WHERE type(rel{i}) = ${key}")
    return "\n".join(out), params


# ---- rule-mining count queries -------------------------------------------------------------
# The candidate atom of a count query has a *variable* relation: SPARQL binds ?cand_rel to the
# predicate IRI, Cypher binds the relationship and returns type(cand_rel). Neither name can be
# a rule variable (those are ?a, ?b, ?e, ... as AMIE names them; no underscore).
CANDIDATE_RELATION = "cand_rel"


def sparql_candidate(subject: str, obj: str) -> str:
    return f"{sparql_term(subject)} ?{CANDIDATE_RELATION} {sparql_term(obj)} ."


def cypher_candidate(atoms: Sequence[Atom], subject: str, obj: str, graph_param: str = "graph") -> str:
    """``MATCH`` of the candidate atom after ``cypher_patterns(atoms)``: variables already in
    ``atoms`` are referenced, a new one is declared on the graph's entities."""
    declared = {query_variable(v) for atom in atoms for v in atom.variables}

    def node(term: str) -> str:
        name = query_variable(term)
        return f"({name})" if name in declared else f"({name}:Entity {{{graph_param}: ${graph_param}}})"

    return f"MATCH {node(subject)}-[{CANDIDATE_RELATION}]->{node(obj)}"
