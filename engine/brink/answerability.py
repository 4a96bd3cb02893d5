"""BRINK App. H, done symbolically: every removed triple must be re-derived from the
incomplete KG by applying the rule of its grounding.

The check runs the rule as a query on a store holding the *published* incomplete KG (the
entity surface forms of the output files): with the head's subject bound to the removed
triple's, the rule's groundings there give the heads it derives from that entity, and the
removed triple must be one of them. This is independent of the bookkeeping that chose the
removal, costs one small query per (rule, head subject) rather than all of a rule's
predictions, and runs the same way on Oxigraph and Neo4j."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kgengine.brink.removal import Grounding, ground_atom
from kgengine.mining.groundings import HeadFilter, groundings
from kgengine.mining.rules import Atom, Rule, is_variable
from kgengine.model import Triple
from kgengine.store import KGStore


@dataclass(frozen=True)
class Answerability:
    checked: int  # kept groundings (removed triple + the rule that should re-derive it)
    rederived: int
    failures: tuple[tuple[Triple, str], ...]  # (surface triple, rule) that did not re-derive

    @property
    def fraction(self) -> float:
        return self.rederived / self.checked if self.checked else 1.0

    def as_dict(self) -> dict[str, object]:
        return {
            "checked": self.checked,
            "rederived": self.rederived,
            "fraction": self.fraction,
            "failures": [{"triple": list(t), "rule": r} for t, r in self.failures[:20]],
        }


def surface_rule(rule: Rule, surface: Mapping[str, str]) -> Rule:
    """The rule with its constants (instantiated atoms) in surface form."""

    def term(t: str) -> str:
        return t if is_variable(t) else surface.get(t, t)

    def atom(a: Atom) -> Atom:
        return Atom(a.relation, term(a.subject), term(a.object))

    return Rule.of([atom(a) for a in rule.body], atom(rule.head))


def surface_triple(triple: Triple, surface: Mapping[str, str]) -> Triple:
    return Triple(surface[triple.head], triple.relation, surface[triple.tail])


def bind(rule: Rule, variable: str, value: str) -> Rule:
    """``rule`` with ``variable`` replaced by the constant ``value`` everywhere."""

    def atom(a: Atom) -> Atom:
        return Atom(a.relation, value if a.subject == variable else a.subject,
                    value if a.object == variable else a.object)

    return Rule.of([atom(a) for a in rule.body], atom(rule.head))


def derived_heads(store: KGStore, graph: str, rule: Rule, subject: str) -> set[Triple]:
    """The head triples ``rule`` derives on ``graph`` for head subject ``subject``."""
    head_subject = rule.head.subject
    if is_variable(head_subject):
        bound = bind(rule, head_subject, subject)
        if bound.variables:  # else (h(?a,?a) ⇐ …) the query would select nothing: run unbound
            return {ground_atom(bound.head, row) for row in groundings(store, graph, bound,
                                                                        head=HeadFilter.ANY)}
    elif head_subject != subject:
        return set()
    return {t for t in (ground_atom(rule.head, row)
                        for row in groundings(store, graph, rule, head=HeadFilter.ANY))
            if t.head == subject}


def check_answerability(
    store: KGStore,
    graph: str,
    rules: Sequence[Rule],
    kept: Sequence[Grounding],
    surface: Mapping[str, str],
    workers: int = 1,
    advance: Callable[[int], None] = lambda n: None,
) -> Answerability:
    """Test every kept grounding: its rule, applied to ``graph`` (the incomplete KG in
    surface form), must derive its removed head triple."""
    groups: dict[tuple[int, str], list[Triple]] = defaultdict(list)
    for g in kept:
        triple = surface_triple(g.head, surface)
        groups[(g.rule, triple.head)].append(triple)
    surface_rules = {i: surface_rule(rules[i], surface) for i in {g.rule for g in kept}}

    def check(key: tuple[int, str]) -> list[tuple[Triple, bool]]:
        derived = derived_heads(store, graph, surface_rules[key[0]], key[1])
        advance(1)
        return [(t, t in derived) for t in groups[key]]

    order = sorted(groups)
    with ThreadPoolExecutor(max(1, workers)) as pool:
        results = list(pool.map(check, order))
    checked = rederived = 0
    failures: list[tuple[Triple, str]] = []
    for (index, _), outcome in zip(order, results, strict=True):
        for triple, ok in outcome:
            checked += 1
            rederived += ok
            if not ok:
                failures.append((triple, str(rules[index])))
    return Answerability(checked, rederived, tuple(failures))
