"""The matrix engine's vectorised passes against its general path, count by count: the head
tables (closing atoms of every one-atom body) and the batched body sizes of two- and
three-atom path rules give the same numbers as one sparse computation per candidate, on
random graphs with self-loops, pairs linked both ways and several relations per pair."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from kgengine.mining import budget, chains
from kgengine.mining.chains import Chain, chains_of
from kgengine.mining.counting import FRESH
from kgengine.mining.graph_index import KGIndex
from kgengine.mining.matrix import MatrixEngine
from kgengine.mining.rules import Atom
from kgengine.model import Triple


def random_graph(seed: int, entities: int = 14, relations: int = 4, facts: int = 90) -> list[Triple]:
    rng = random.Random(seed)
    def entity() -> str:
        return f"e{rng.randrange(entities)}"

    triples = {Triple(entity(), f"r{rng.randrange(relations)}", entity()) for _ in range(facts)}
    # pairs linked both ways and by two relations: the walks' duplicate cases
    h, r, t = next(iter(sorted(triples)))
    triples |= {Triple(t, r, h), Triple(h, "r0" if r != "r0" else "r1", t), Triple(h, r, h)}
    return sorted(triples)


def two_atom_rules(index: KGIndex, head: str) -> list[tuple[Atom, ...]]:
    h = Atom(head, "?a", "?b")
    out = []
    for rel in index.relations:
        for s, o in (("?a", "?f"), ("?f", "?a"), ("?b", "?f"), ("?f", "?b"), ("?a", "?b"), ("?b", "?a")):
            atom = Atom(rel, s, o)
            out.append((h, atom))
    return out


@pytest.mark.parametrize("tight", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_head_tables_count_as_the_general_path(seed: int, tight: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    index = KGIndex(random_graph(seed))
    engine = MatrixEngine(index)
    if tight:  # a budget that the busiest entity's walk just fits: the facts go in many blocks
        busiest = int(index.undirected_degrees(np.arange(index.n)).max())
        monkeypatch.setattr(budget, "MESSAGE_BUDGET", busiest)
    for head in index.relations:
        for atoms in two_atom_rules(index, head):
            variables = ["?a", "?b", "?f"] if "?f" in atoms[1].terms else ["?a", "?b"]
            shapes = [(s, o) for s in variables for o in variables if s != o]
            shapes += [("?a", FRESH), (FRESH, "?b")]
            for min_support in (0, 2):
                fast = engine.refinement_counts(atoms, shapes, min_support)
                slow = engine.candidates.refinement_counts(atoms, shapes, min_support)
                for shape, a, b in zip(shapes, fast, slow, strict=True):
                    wanted = {r: c for r, c in b.items() if c >= max(min_support, 1)}
                    got = {r: c for r, c in a.items() if c >= max(min_support, 1)}
                    assert got == wanted, (atoms, shape, min_support)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_batched_body_sizes_count_as_one_by_one(seed: int, compiled: bool,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    index = KGIndex(random_graph(seed))
    engine = MatrixEngine(index)
    if compiled:  # the kernel loaded: the batched counts walk with it, not with sparse products
        engine.chain_counter()
    rules = []
    for head in index.relations:
        h = Atom(head, "?a", "?b")
        for p in index.relations:
            for q in index.relations:
                for near in (Atom(p, "?a", "?f"), Atom(p, "?f", "?a")):
                    for far in (Atom(q, "?f", "?b"), Atom(q, "?b", "?f")):
                        rules.append((h, near, far) if (p, q) < (q, p) else (h, far, near))
    for subject_side in (True, False):
        pca = engine.body_sizes(rules, pca=True, subject_side=subject_side)
        assert pca == [engine.pca_body_size(r, subject_side) for r in rules]
    assert engine.body_sizes(rules) == [engine.body_size(r) for r in rules]
    # capped: each count stops at or above its cap where the exact one reaches it
    caps = [3] * len(rules)
    for exact, capped in zip([engine.body_size(r) for r in rules], engine.body_sizes(rules, caps=caps),
                             strict=True):
        assert capped == exact if exact < 3 else capped >= 3
    # a budget no walk fits: every rule is left to the one-by-one count
    monkeypatch.setattr(budget, "MESSAGE_BUDGET", 0)
    blocked = engine.body_sizes(rules)
    assert None in blocked
    assert all(c is None or c == engine.body_size(r) for r, c in zip(rules, blocked, strict=True))


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_batched_three_atom_path_body_sizes_count_as_one_by_one(seed: int, compiled: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    index = KGIndex(random_graph(seed))
    engine = MatrixEngine(index)
    if compiled:
        engine.chain_counter()
    rels = index.relations[:3]
    rules = []
    for head in index.relations[:2]:
        h = Atom(head, "?a", "?b")
        for p, m, q in itertools.product(rels, repeat=3):
            for near, middle, far in itertools.product((Atom(p, "?a", "?f"), Atom(p, "?f", "?a")),
                                                       (Atom(m, "?f", "?g"), Atom(m, "?g", "?f")),
                                                       (Atom(q, "?g", "?b"), Atom(q, "?b", "?g"))):
                rules.append((h, far, near, middle))  # any body order
        # not paths (a cycle through ?a, a branch at ?f): left to the one-by-one count
        rules += [(h, Atom(rels[0], "?a", "?f"), Atom(rels[1], "?f", "?b"), Atom(rels[2], "?f", "?a")),
                  (h, Atom(rels[0], "?a", "?f"), Atom(rels[1], "?f", "?b"), Atom(rels[2], "?f", "?g"))]
    batched = engine.body_sizes(rules)
    assert [c is None for c in batched[-2:]] == [True, True]
    assert batched == [None if c is None else engine.body_size(r)
                       for r, c in zip(rules, batched, strict=True)]
    assert sum(c is not None for c in batched) == len(rules) - 4
    for subject_side in (True, False):
        pca = engine.body_sizes(rules, pca=True, subject_side=subject_side)
        assert pca == [None if c is None else engine.pca_body_size(r, subject_side)
                       for r, c in zip(rules, pca, strict=True)]
    exact = [engine.body_size(r) for r in rules]
    assert sum(e > 0 for e in exact) > len(rules) // 4  # the paths exist: the comparison is not vacuous
    for e, capped in zip(exact, engine.body_sizes(rules, caps=[3] * len(rules)), strict=True):
        assert capped is None or (capped == e if e < 3 else capped >= 3)
    monkeypatch.setattr(budget, "MESSAGE_BUDGET", 0)  # no walk fits: all left to the one-by-one count
    assert all(c is None for c in engine.body_sizes(rules))


def chain_rules(relations: list[str], head: str) -> list[tuple[tuple[Atom, ...], tuple[str, str]]]:
    """Rules whose body is two chains from the head's variables, with the closing shape that
    joins the chains' ends: three-hop paths from either end, one atom at each end (the
    chain tables), two chains from one head variable, a three-atom chain (one by one), every
    atom either way round."""
    h = Atom(head, "?a", "?b")
    p, q, s = relations[0], relations[1 % len(relations)], relations[2 % len(relations)]

    def both(rel: str, u: str, v: str) -> tuple[Atom, Atom]:
        return Atom(rel, u, v), Atom(rel, v, u)

    out = []
    for first, second in itertools.product(both(p, "?a", "?f"), both(q, "?f", "?g")):
        out.append(((h, first, second), ("?g", "?b")))
        out.append(((h, second, first), ("?b", "?g")))  # body order does not matter
    for first, second in itertools.product(both(p, "?b", "?f"), both(s, "?f", "?g")):
        out.append(((h, first, second), ("?a", "?g")))
    for first, second in itertools.product(both(p, "?a", "?f"), both(q, "?b", "?g")):
        out.append(((h, first, second), ("?f", "?g")))
    for first, second in itertools.product(both(q, "?a", "?f"), both(p, "?b", "?g")):
        out.append(((h, first, second), ("?f", "?g")))  # ?b's table (p from ?b) is built: shared
    for first, second in itertools.product(both(q, "?a", "?f"), both(s, "?a", "?g")):
        out.append(((h, first, second), ("?g", "?f")))
    for chain in itertools.product(both(p, "?a", "?f"), both(q, "?f", "?g"), both(s, "?g", "?h")):
        out.append(((h, *chain), ("?h", "?b")))
    out.append(((h, Atom(p, "?a", "?f"), Atom(q, "?f", "?g"), Atom(s, "?b", "?h")), ("?g", "?h")))
    return out


# the chain tables' three ways to meet the pairs: (search ratio, pairs listed per e at most)
TABLE_WAYS = {
    "searched": (0, 0),  # every x searched for the other end's neighbours
    "walked": (1 << 40, 0),  # every x walked, fact by fact
    "listed": (1 << 40, 1 << 40),  # e's pairs listed once for all its facts (when it has several)
    "default": (chains.SEARCH_RATIO, chains.REACH_MAX),
}


@pytest.mark.parametrize("way", TABLE_WAYS)
@pytest.mark.parametrize("seed", range(6))
def test_chain_closing_atoms_count_as_the_general_path(seed: int, way: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    search_ratio, reach_max = TABLE_WAYS[way]
    monkeypatch.setattr(chains, "SEARCH_RATIO", search_ratio)
    monkeypatch.setattr(chains, "REACH_MAX", reach_max)
    index = KGIndex(random_graph(seed, entities=12, facts=110))
    engine = MatrixEngine(index)
    nonzero = 0
    for head in index.relations:
        for atoms, (u, v) in chain_rules(index.relations, head):
            assert chains_of(atoms, (u, v), index.relation_ids) is not None, atoms
            shapes = [(u, v), (v, u)]
            for min_support in (0, 2):
                fast = engine.refinement_counts(atoms, shapes, min_support)
                slow = engine.candidates.refinement_counts(atoms, shapes, min_support)
                for shape, a, b in zip(shapes, fast, slow, strict=True):
                    wanted = {r: c for r, c in b.items() if c >= max(min_support, 1)}
                    assert a == wanted, (atoms, shape, min_support)
                    nonzero += bool(wanted)
    assert nonzero > 100  # the chains meet: the comparison is not vacuous


def test_bodies_that_are_not_two_chains_are_left_to_the_general_path() -> None:
    ids = {"p": 0, "q": 1, "r": 2}
    h = Atom("r", "?a", "?b")
    not_chains = [
        ((h, Atom("p", "?a", "?f"), Atom("q", "?f", "?b")), ("?f", "?a")),  # ?f on two atoms to the head
        ((h, Atom("p", "?a", "?f"), Atom("q", "?f", "?b")), ("?a", "?b")),  # the body only filters
        ((h, Atom("p", "?a", "?f"), Atom("q", "?a", "?f")), ("?f", "?b")),  # parallel atoms
        ((h, Atom("p", "?a", "e1"), Atom("q", "?a", "?f")), ("?f", "?b")),  # a constant
        ((h, Atom("p", "?a", "?f"), Atom("q", "?f", "?f")), ("?f", "?b")),  # reflexive
        ((h, Atom("p", "?a", "?f"), Atom("q", "?f", "?g")), ("?f", "?b")),  # ?g off both chains
        ((h, Atom("p", "?a", "?f"), Atom("s", "?f", "?g")), ("?g", "?b")),  # unknown relation
        ((h, Atom("p", "?a", "?f")), ("?f", FRESH)),  # dangling
    ]
    for atoms, shape in not_chains:
        assert chains_of(atoms, shape, ids) is None, (atoms, shape)
    found = chains_of((h, Atom("p", "?f", "?a"), Atom("q", "?f", "?g")), ("?b", "?g"), ids)
    assert found == (Chain(1, (), ()), Chain(0, (0, 1), (False, True)))
