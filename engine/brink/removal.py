"""BRINK §3.2 triple removal: grounding selection and conflict-free head removal (pure).

Vocabulary: a *grounding* is one substitution of a rule's variables (as returned by
:func:`kgengine.mining.groundings.groundings`) turned into triples: the grounded body (the
alternative path) and the grounded head (the triple to remove)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kgengine.mining.rules import Atom, Rule, is_variable
from kgengine.model import Triple


class Selection(StrEnum):
    """How the up-to-N groundings of a rule are chosen."""

    SAMPLE = "sample"  # a seeded uniform sample of all groundings (our default)
    FIRST = "first"  # the first N in the grounding query's deterministic order


@dataclass(frozen=True, slots=True)
class Grounding:
    rule: int  # index of the rule in the build's rule list
    body: tuple[Triple, ...]
    head: Triple

    @property
    def triples(self) -> tuple[Triple, ...]:
        return (*self.body, self.head)


def ground_atom(atom: Atom, substitution: Mapping[str, str]) -> Triple:
    """``substitution`` maps variable names without '?' (as groundings() returns them)."""

    def value(term: str) -> str:
        return substitution[term[1:]] if is_variable(term) else term

    return Triple(value(atom.subject), atom.relation, value(atom.object))


def ground(rule_index: int, rule: Rule, substitution: Mapping[str, str]) -> Grounding:
    return Grounding(
        rule_index,
        tuple(ground_atom(a, substitution) for a in rule.body),
        ground_atom(rule.head, substitution),
    )


def rule_rng(seed: int, rule: Rule) -> random.Random:
    """One stream per rule, keyed by the rule's canonical text: a rule's sample does not
    change when other rules are added to or removed from the rule file."""
    return random.Random(f"{seed}/select/{rule}")


def rule_sample_order(rules: Sequence[Rule], seed: int) -> list[int]:
    """Indices of ``rules`` in the seeded order in which ``--max-rules`` takes them (the
    official code draws its rules at random too: ``grounding_sample.py --max_rules 300``). The
    order depends on the rules' canonical texts, not on their order in the rule file."""
    by_text = sorted(range(len(rules)), key=lambda i: str(rules[i]))
    random.Random(f"{seed}/rules").shuffle(by_text)
    return by_text


def select(candidates: Sequence[Grounding], n: int, mode: Selection, rng: random.Random) -> list[Grounding]:
    """Up to ``n`` groundings of one rule. A grounding whose head is one of its own body
    triples (``r(x,z) ∧ s(z,y) ⇒ r(x,y)`` grounded with z = y, or a symmetric rule on a
    self-loop) is skipped before choosing: removing its head would cut its own path.

    The result keeps the candidates' order (the query's deterministic order), so the same
    seed gives the same list on every backend."""
    eligible = [g for g in candidates if g.head not in g.body]
    if mode == Selection.FIRST or len(eligible) <= n:
        return eligible[:n]
    return [eligible[i] for i in sorted(rng.sample(range(len(eligible)), n))]


@dataclass(frozen=True)
class Removal:
    selected: tuple[Grounding, ...]  # every selected grounding, all rules
    kept: tuple[Grounding, ...]  # selected groundings whose head is removed
    conflicts: tuple[Grounding, ...]  # selected, but their head is another selected body triple
    removed: tuple[Triple, ...]  # distinct heads of ``kept``, first-seen order

    @property
    def protected(self) -> set[Triple]:
        """Body triples of every selected grounding: none of them may be removed."""
        return {t for g in self.selected for t in g.body}


def remove(selected: Iterable[Grounding]) -> Removal:
    """BRINK's two constraints, decided in one pass over *all* selected groundings (as the
    official code does): a grounding's head is removed only if it is no body triple of any
    selected grounding. So every body triple of every selected grounding stays, even of the
    groundings dropped as conflicts, and the result does not depend on the groundings'
    order (a greedy pass would keep a few more, but which ones would depend on rule order)."""
    chosen = tuple(selected)
    in_bodies = Counter(t for g in chosen for t in set(g.body))
    kept: list[Grounding] = []
    conflicts: list[Grounding] = []
    for g in chosen:
        # select() never yields a head inside its own body, so any count is another's body
        (conflicts if in_bodies[g.head] else kept).append(g)
    removed = tuple(dict.fromkeys(g.head for g in kept))
    return Removal(chosen, tuple(kept), tuple(conflicts), removed)


class KGWithout:
    """The complete KG without the removed triples, as a view: a Wikidata5m-sized KG is not
    copied (a set of 21M triples is ~2.5 GB) to drop a few thousand of them."""

    def __init__(self, complete: set[Triple], removed: Iterable[Triple]) -> None:
        self.complete = complete
        self.removed = frozenset(removed)
        self._size = len(complete) - sum(1 for t in self.removed if t in complete)

    def __contains__(self, triple: object) -> bool:
        return triple in self.complete and triple not in self.removed

    def __iter__(self) -> Iterator[Triple]:
        removed = self.removed
        return (t for t in self.complete if t not in removed)

    def __len__(self) -> int:
        return self._size


def removal_violations(complete: set[Triple], incomplete: set[Triple] | KGWithout,
                       removal: Removal) -> list[str]:
    """Every way a build can break §3.2's guarantees (empty when it holds); used by the
    build itself and by the property tests."""
    problems: list[str] = []
    removed = set(removal.removed)
    if isinstance(incomplete, KGWithout):
        is_difference = incomplete.complete is complete and incomplete.removed == removed
    else:
        is_difference = incomplete == complete - removed
    if not is_difference:
        problems.append("incomplete KG is not the complete KG minus the removed triples")
    for g in removal.selected:
        if g.head in g.body:
            problems.append(f"selected grounding has its head in its own body: {g}")
        if not all(t in complete for t in g.triples):
            problems.append(f"grounding is not in the complete KG: {g}")
        missing = [t for t in g.body if t not in incomplete]
        if missing:
            problems.append(f"body triples of a selected grounding were removed: {missing}")
    for g in removal.kept:
        if g.head in incomplete:
            problems.append(f"kept grounding's head was not removed: {g.head}")
    if removed & removal.protected:
        problems.append("a removed triple is a body triple of a selected grounding")
    return problems
