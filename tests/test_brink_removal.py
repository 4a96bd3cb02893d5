"""BRINK §3.2 removal: selection, the two constraints, and the whole build on random KGs."""

from __future__ import annotations

import itertools
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kgengine.brink.build import BuildOptions, build_brink
from kgengine.brink.removal import (
    Grounding,
    KGWithout,
    Selection,
    ground,
    removal_violations,
    remove,
    rule_rng,
    rule_sample_order,
    select,
)
from kgengine.mining.rules import Atom, Rule, parse_rule
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore

T = Triple


def g(rule: int, body: list[tuple[str, str, str]], head: tuple[str, str, str]) -> Grounding:
    return Grounding(rule, tuple(T(*b) for b in body), T(*head))


# ---- an independent grounding oracle: brute force over the facts ---------------------------
def oracle_groundings(rule: Rule, facts: set[Triple]) -> list[dict[str, str]]:
    """Every substitution of the rule's variables making body and head facts."""
    entities = sorted({e for t in facts for e in (t.head, t.tail)})
    names = sorted(rule.variables)
    out = []
    for values in itertools.product(entities, repeat=len(names)):
        sub = {n[1:]: v for n, v in zip(names, values, strict=True)}
        grounded = ground(0, rule, sub)
        if all(t in facts for t in grounded.triples):
            out.append(sub)
    return out


RELATIONS = ["p", "q", "s"]
SHAPES = [  # (body atoms, head atom) over variables ?a ?b (head) and ?e
    ([("?b", "?a")], ("?a", "?b")),
    ([("?a", "?b")], ("?a", "?b")),
    ([("?a", "?e"), ("?e", "?b")], ("?a", "?b")),
    ([("?e", "?a"), ("?e", "?b")], ("?a", "?b")),
    ([("?a", "?b"), ("?b", "?a")], ("?a", "?b")),
    ([("?a", "?e"), ("?b", "?e")], ("?a", "?b")),
]


@st.composite
def kg_and_rules(draw: st.DrawFn) -> tuple[set[Triple], list[Rule]]:
    n_entities = draw(st.integers(2, 6))
    entity = st.integers(0, n_entities - 1).map(lambda i: f"n{i}")
    # self-loops allowed on purpose: they make groundings whose head is a body triple
    facts = draw(st.sets(st.builds(T, entity, st.sampled_from(RELATIONS), entity), min_size=1,
                         max_size=24))
    rules: dict[Rule, None] = {}
    for _ in range(draw(st.integers(1, 5))):
        body_shape, head_shape = draw(st.sampled_from(SHAPES))
        body = [Atom(draw(st.sampled_from(RELATIONS)), s, o) for s, o in body_shape]
        head = Atom(draw(st.sampled_from(RELATIONS)), *head_shape)
        if head in body:
            continue
        rules[Rule.of(body, head)] = None
    return facts, list(rules)


@settings(max_examples=200, deadline=None)
@given(kg_and_rules(), st.integers(1, 4), st.sampled_from(list(Selection)), st.integers(0, 3))
def test_removal_constraints_hold_on_random_kgs(data, n: int, mode: Selection, seed: int) -> None:
    facts, rules = data
    selected = []
    for i, rule in enumerate(rules):
        candidates = [ground(i, rule, sub) for sub in oracle_groundings(rule, facts)]
        chosen = select(candidates, n, mode, rule_rng(seed, rule))
        assert len(chosen) <= n
        assert all(c in candidates and c.head not in c.body for c in chosen)
        selected += chosen
    removal = remove(selected)
    incomplete = facts - set(removal.removed)
    assert removal_violations(facts, incomplete, removal) == []
    # every removed triple is re-derived from the incomplete KG by the rule of its grounding
    for kept in removal.kept:
        rule = rules[kept.rule]
        derived = {ground(0, rule, sub).head for sub in oracle_groundings_body(rule, incomplete)}
        assert kept.head in derived
    # one pass decides on all selected groundings: no kept head is anyone's body triple
    assert not set(removal.removed) & {t for s in selected for t in s.body}
    assert len(removal.kept) + len(removal.conflicts) == len(selected)


def oracle_groundings_body(rule: Rule, facts: set[Triple]) -> list[dict[str, str]]:
    body_only = Rule(rule.body, rule.body[0])  # head = a body atom: "head is a fact" is free
    return oracle_groundings(body_only, facts)


def test_select_skips_groundings_whose_head_is_in_their_own_body() -> None:
    loop = g(0, [("x", "r", "y"), ("y", "s", "y")], ("x", "r", "y"))
    fine = g(0, [("x", "r", "z"), ("z", "s", "y")], ("x", "r", "y"))
    assert select([loop, fine], 30, Selection.FIRST, random.Random(0)) == [fine]
    assert select([loop, fine], 30, Selection.SAMPLE, random.Random(0)) == [fine]


def test_select_first_keeps_query_order_and_sample_is_seeded() -> None:
    candidates = [g(0, [(f"a{i}", "r", "b")], (f"b{i}", "r", "a")) for i in range(100)]
    assert select(candidates, 30, Selection.FIRST, random.Random(0)) == candidates[:30]
    rule = parse_rule("r(?b,?a) => r(?a,?b)")
    one = select(candidates, 30, Selection.SAMPLE, rule_rng(7, rule))
    assert one == select(candidates, 30, Selection.SAMPLE, rule_rng(7, rule))
    assert one != select(candidates, 30, Selection.SAMPLE, rule_rng(8, rule))
    assert len(set(one)) == 30
    assert one == sorted(one, key=candidates.index)  # sample keeps the query order
    assert select(candidates[:10], 30, Selection.SAMPLE, rule_rng(7, rule)) == candidates[:10]


def test_remove_drops_a_grounding_whose_head_another_grounding_needs() -> None:
    first = g(0, [("a", "husband", "b")], ("b", "wife", "a"))
    second = g(1, [("b", "wife", "a")], ("a", "husband", "b"))  # needs first's head
    third = g(2, [("c", "son", "d")], ("d", "father", "c"))
    removal = remove([first, second, third])
    assert removal.kept == (third,)
    assert set(removal.conflicts) == {first, second}
    assert removal.removed == (T("d", "father", "c"),)


def test_remove_keeps_one_removed_triple_for_several_groundings_of_it() -> None:
    one = g(0, [("a", "r", "e1"), ("e1", "s", "b")], ("a", "h", "b"))
    two = g(0, [("a", "r", "e2"), ("e2", "s", "b")], ("a", "h", "b"))
    removal = remove([one, two])
    assert removal.kept == (one, two)
    assert removal.removed == (T("a", "h", "b"),)


def test_kg_without_is_the_set_difference() -> None:
    rng = random.Random(2)
    complete = {Triple(str(rng.randrange(20)), "r", str(rng.randrange(20))) for _ in range(150)}
    removed = set(rng.sample(sorted(complete), 30))
    view = KGWithout(complete, removed)
    assert set(view) == complete - removed and len(view) == len(complete - removed)
    assert all((t in view) == (t in complete - removed) for t in complete)


def test_violations_catch_a_broken_removal() -> None:
    first = g(0, [("a", "r", "b")], ("b", "s", "a"))
    complete = {T("a", "r", "b"), T("b", "s", "a")}
    removal = remove([first])
    assert removal_violations(complete, complete - set(removal.removed), removal) == []
    assert removal_violations(complete, {T("b", "s", "a")}, removal)  # body removed
    assert removal_violations(complete, complete, removal)  # head not removed


# ---- the whole build on a real Oxigraph store, random KGs and rules ------------------------
@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kg_and_rules(), st.integers(1, 3), st.integers(0, 2), st.sampled_from([None, 1, 2]))
def test_build_on_random_kgs_keeps_constraints_and_answerability(data, n: int, seed: int,
                                                                 max_rules: int | None) -> None:
    facts, rules = data
    with tempfile.TemporaryDirectory() as tmp, OxigraphStore(str(Path(tmp) / "store")) as store:
        store.load("kg", sorted(facts), dataset="random")
        result = build_brink(store, "kg", rules, Path(tmp) / "out",
                             BuildOptions(groundings_per_rule=n, seed=seed, tau=1.0, max_rules=max_rules))
    removal = result.removal
    # the rules grounded: with --max-rules, the first ones in the seeded order that have an
    # eligible grounding (by the brute-force oracle), else every rule that has one
    def has_eligible_grounding(i: int) -> bool:
        grounded = [ground(i, rules[i], sub) for sub in oracle_groundings(rules[i], facts)]
        return any(gr.head not in gr.body for gr in grounded)

    eligible = [i for i in rule_sample_order(rules, seed) if has_eligible_grounding(i)]
    assert {g.rule for g in removal.selected} == set(eligible[:max_rules])
    assert result.stats["rules"]["with_groundings"] == len(eligible[:max_rules])
    incomplete = facts - set(removal.removed)
    assert removal_violations(facts, incomplete, removal) == []
    assert result.answerability.fraction == 1.0
    assert result.answerability.checked == len(removal.kept)
    asked = [item for items in result.splits.values() for item in items]
    assert {item.triple for item in asked} <= set(removal.removed)


def test_rule_sample_order_is_seeded_and_blind_to_the_rule_file_order() -> None:
    rules = [parse_rule(f"r{i}(?a,?b) => h(?a,?b)") for i in range(12)]
    texts = [str(rules[i]) for i in rule_sample_order(rules, 7)]
    shuffled = random.Random(1).sample(rules, len(rules))
    assert [str(shuffled[i]) for i in rule_sample_order(shuffled, 7)] == texts
    assert sorted(texts) == sorted(str(r) for r in rules)  # a permutation
    assert [str(rules[i]) for i in rule_sample_order(rules, 8)] != texts
