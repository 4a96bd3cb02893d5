"""Groundings of a rule: substitutions that make every body atom a KG fact, fetched by
running the rule body as a query on the store (either backend)."""

from __future__ import annotations

from enum import StrEnum

from kgengine.mining.compile import (
    cypher_patterns,
    query_variable,
    sparql_atom,
    sparql_patterns,
)
from kgengine.mining.rules import Rule
from kgengine.store import KGStore


class HeadFilter(StrEnum):
    ANY = "any"  # body only
    WITH = "with"  # the grounded head is a fact too
    WITHOUT = "without"  # the grounded head is missing (a prediction)


def grounding_variables(rule: Rule) -> list[str]:
    """Head variables first, then body variables in order of appearance: the order of the
    groundings' columns and of their sort."""
    seen: list[str] = []
    for atom in (rule.head, *rule.body):
        for v in atom.variables:
            if v not in seen:
                seen.append(v)
    return seen


def grounding_parts(rule: Rule, language: str, head: HeadFilter, limit: int | None) -> tuple[dict, dict]:
    """Placeholders and parameters of ``rule_groundings`` for one backend's language."""
    names = [query_variable(v) for v in grounding_variables(rule)]
    if language == "sparql":
        head_pattern = sparql_atom(rule.head)
        head_filter = {
            HeadFilter.ANY: "",
            HeadFilter.WITH: head_pattern,
            HeadFilter.WITHOUT: f"FILTER NOT EXISTS {{ {head_pattern} }}",
        }[head]
        parts = {
            "vars": " ".join("?" + n for n in names),
            "body": sparql_patterns(rule.body),
            "head_filter": head_filter,
            "limit": f"LIMIT {int(limit)}" if limit is not None else "",
        }
        return parts, {}
    if language == "cypher":
        body, params = cypher_patterns(rule.body)
        head_match, head_params = cypher_patterns([rule.head])
        # rename the head's constant parameters so they cannot clash with the body's
        for key in sorted(head_params, reverse=True):
            head_match = head_match.replace(f"${key}", f"$h{key}")
            params[f"h{key}"] = head_params[key]
        head_exists = head_match.removeprefix("MATCH ")
        head_filter = {
            HeadFilter.ANY: "",
            HeadFilter.WITH: f"WHERE EXISTS {{ MATCH {head_exists} }}",
            HeadFilter.WITHOUT: f"WHERE NOT EXISTS {{ MATCH {head_exists} }}",
        }[head]
        parts = {
            "body": body,
            "head_filter": head_filter,
            "returns": ", ".join(f"{n}.id AS {n}" for n in names),
            "order": ", ".join(names),
            "limit": "LIMIT $limit" if limit is not None else "",
        }
        if limit is not None:
            params["limit"] = int(limit)
        return parts, params
    raise ValueError(f"unknown query language {language!r}")


def groundings(
    store: KGStore,
    graph: str,
    rule: Rule,
    *,
    head: HeadFilter = HeadFilter.WITH,
    limit: int | None = None,
) -> list[dict[str, str]]:
    """Distinct substitutions (variable name without '?' -> entity id), ordered by the head
    variables then the others, so a limit keeps the same groundings on every backend."""
    parts, params = grounding_parts(rule, store.query_language, HeadFilter(head), limit)
    return store.run_template("rule_groundings", graph, parts, **params)
