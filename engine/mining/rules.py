"""Rule algebra: atoms, Horn rules, canonical form, rule types, AMIE text formats.

Pure functions only (no I/O), so everything here is cheap to test."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from itertools import permutations

VARIABLE_NAMES = "abcdefghijklmnopqrstuvwxyz"


def is_variable(term: str) -> bool:
    return term.startswith("?")


def variable_counts(atoms: Iterable[Atom]) -> dict[str, int]:
    """How many times each variable occurs in ``atoms``."""
    counts: dict[str, int] = {}
    for atom in atoms:
        for v in atom.variables:
            counts[v] = counts.get(v, 0) + 1
    return counts


def is_closed(atoms: Iterable[Atom]) -> bool:
    """Every variable of the atoms occurs at least twice (AMIE's closed rule)."""
    return all(n >= 2 for n in variable_counts(atoms).values())


@dataclass(frozen=True, order=True, slots=True)
class Atom:
    """``relation(subject, object)``; arguments starting with ``?`` are variables, anything
    else is a constant (an entity id)."""

    relation: str
    subject: str
    object: str

    @property
    def terms(self) -> tuple[str, str]:
        return (self.subject, self.object)

    @property
    def variables(self) -> tuple[str, ...]:
        # written out: the miner asks this millions of times
        s, o = self.subject, self.object
        if s.startswith("?"):
            return (s, o) if o.startswith("?") else (s,)
        return (o,) if o.startswith("?") else ()

    def rename(self, mapping: dict[str, str]) -> Atom:
        return Atom(self.relation, mapping.get(self.subject, self.subject),
                    mapping.get(self.object, self.object))

    def __str__(self) -> str:
        return f"{self.relation}({self.subject},{self.object})"


class RuleType(StrEnum):
    """BRINK Table 1 categories. Composition is the two-atom chain r1(x,z) ∧ r2(z,y) ⇒ r3(x,y)
    (this reproduces BRINK's 56 composition rules on Family); longer chains, chains that run
    against the head's direction, triangles and intersections are 'other' (BRINK App. G)."""

    SYMMETRY = "symmetry"
    INVERSION = "inversion"
    HIERARCHY = "hierarchy"
    COMPOSITION = "composition"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Rule:
    """``body[0] ∧ … ∧ body[n-1] ⇒ head``. Construct through :meth:`of` to get the canonical
    form, so that rules equal up to variable renaming and body order compare equal."""

    body: tuple[Atom, ...]
    head: Atom

    @classmethod
    def of(cls, body: list[Atom] | tuple[Atom, ...], head: Atom) -> Rule:
        return canonical(tuple(body), head)

    @property
    def length(self) -> int:
        """AMIE's rule length: body atoms plus the head atom."""
        return len(self.body) + 1

    @property
    def variables(self) -> set[str]:
        return {v for atom in (*self.body, self.head) for v in atom.variables}

    @property
    def is_closed(self) -> bool:
        """Every variable appears at least twice."""
        return is_closed((*self.body, self.head))

    @property
    def is_connected(self) -> bool:
        atoms = [*self.body, self.head]
        reached = {0}
        changed = True
        while changed:
            changed = False
            for i, atom in enumerate(atoms):
                if i in reached:
                    continue
                if any(set(atom.terms) & set(atoms[j].terms) for j in reached):
                    reached.add(i)
                    changed = True
        return len(reached) == len(atoms)

    @property
    def rule_type(self) -> RuleType:
        return classify(self)

    def __str__(self) -> str:
        return " & ".join(str(a) for a in self.body) + " => " + str(self.head)


def _rename_in_order(body: tuple[Atom, ...], head: Atom) -> tuple[tuple[Atom, ...], Atom]:
    """Head variables become ?a, ?b; other variables ?e, ?f, … in order of first use
    (AMIE's naming: c and d are skipped by AMIE too, which keeps a/b for the head)."""
    mapping: dict[str, str] = {}
    head_names = iter("ab")
    for term in head.terms:
        if is_variable(term) and term not in mapping:
            mapping[term] = "?" + next(head_names)
    others = iter(VARIABLE_NAMES[4:])
    for atom in body:
        for term in atom.terms:
            if is_variable(term) and term not in mapping:
                mapping[term] = "?" + next(others)
    return tuple(a.rename(mapping) for a in body), head.rename(mapping)


def canonical(body: tuple[Atom, ...], head: Atom) -> Rule:
    """The lexicographically smallest renaming (``_rename_in_order``) over all body orders
    (bodies are short). Worked on plain tuples, which order as Atoms do: the miner
    canonicalises every candidate rule, and Atom objects made it a third of its time."""
    if not body:
        renamed_body, renamed_head = _rename_in_order((), head)
        return Rule(renamed_body, renamed_head)
    head_names: dict[str, str] = {}
    for term in head.terms:
        if is_variable(term) and term not in head_names:
            head_names[term] = "?" + "ab"[len(head_names)]
    best: tuple[tuple[str, str, str], ...] | None = None
    for order in permutations([(a.relation, a.subject, a.object) for a in body]):
        mapping = dict(head_names)
        renamed = []
        for relation, s, o in order:
            for term in (s, o):
                if term not in mapping and term.startswith("?"):
                    mapping[term] = "?" + VARIABLE_NAMES[4 + len(mapping) - len(head_names)]
            renamed.append((relation, mapping.get(s, s), mapping.get(o, o)))
        candidate = tuple(sorted(renamed))
        if best is None or candidate < best:
            best = candidate
    assert best is not None
    return Rule(tuple(Atom(*a) for a in best),
                Atom(head.relation, head_names.get(head.subject, head.subject),
                     head_names.get(head.object, head.object)))


def classify(rule: Rule) -> RuleType:
    x, y = rule.head.subject, rule.head.object
    if len(rule.body) == 1:
        b = rule.body[0]
        if (b.subject, b.object) == (y, x):
            return RuleType.SYMMETRY if b.relation == rule.head.relation else RuleType.INVERSION
        if (b.subject, b.object) == (x, y) and b.relation != rule.head.relation:
            return RuleType.HIERARCHY
        return RuleType.OTHER
    if len(rule.body) == 2:
        for first, second in permutations(rule.body):
            if (first.subject == x and second.object == y and first.object == second.subject
                    and first.object not in (x, y)):
                return RuleType.COMPOSITION
    return RuleType.OTHER


_ATOM_FUNC = re.compile(r"\s*([^()\s&]+)\((\?\w+|[^,()]+),(\?\w+|[^,()]+)\)\s*")


def parse_rule(text: str) -> Rule:
    """Parse either ``rel(?x,?y) & rel2(?y,?z) => head(?x,?z)`` or AMIE's own
    ``?x  rel  ?y  ?y  rel2  ?z   => ?x  head  ?z`` notation."""
    if "=>" not in text:
        raise ValueError(f"not a rule (no '=>'): {text!r}")
    body_text, head_text = (part.strip() for part in text.split("=>", 1))
    if "(" in head_text:
        body = [_parse_func_atom(a) for a in body_text.split("&") if a.strip()]
        head = _parse_func_atom(head_text)
    else:
        body = _parse_amie_atoms(body_text)
        heads = _parse_amie_atoms(head_text)
        if len(heads) != 1:
            raise ValueError(f"rule head must be one atom: {text!r}")
        head = heads[0]
    if not body:
        raise ValueError(f"rule has an empty body: {text!r}")
    return Rule.of(body, head)


def _parse_func_atom(text: str) -> Atom:
    match = _ATOM_FUNC.fullmatch(text)
    if not match:
        raise ValueError(f"cannot parse atom {text.strip()!r} (expected rel(?x,?y))")
    relation, subject, obj = match.groups()
    return Atom(relation, subject.strip(), obj.strip())


def _parse_amie_atoms(text: str) -> list[Atom]:
    tokens = text.split()
    if len(tokens) % 3:
        raise ValueError(f"cannot parse AMIE atoms from {text!r} (need subject relation object)")
    return [Atom(tokens[i + 1], tokens[i], tokens[i + 2]) for i in range(0, len(tokens), 3)]
