"""Rule mining on hand-built KGs: measures of each rule shape computed by hand (the working is in
the comments), AMIE's pruning rules one by one, and both counting engines against brute-force
enumeration of substitutions on seeded random KGs."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from kgengine.mining.graph_index import KGIndex
from kgengine.mining.io import MinedRule
from kgengine.mining.matrix import MatrixEngine
from kgengine.mining.measures import Side, support_threshold
from kgengine.mining.query_engine import QueryEngine
from kgengine.mining.rules import Atom, Rule, RuleType, is_variable, parse_rule
from kgengine.mining.search import FRESH, Miner, MiningOptions, mine
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore

# ---- brute force: every substitution, by backtracking over the facts ------------------------


def substitutions(facts: set[Triple], atoms: Sequence[Atom]) -> Iterable[dict[str, str]]:
    # atoms joined in a connected order (the next one shares a variable when it can), so that
    # the backtracking never enumerates cross products
    ordered, bound_vars, rest = [], set(), list(atoms)
    while rest:
        nxt = next((a for a in rest if set(a.variables) & bound_vars), rest[0])
        rest.remove(nxt)
        ordered.append(nxt)
        bound_vars |= set(nxt.variables)
    atoms = ordered

    def walk(i: int, binding: dict[str, str]) -> Iterable[dict[str, str]]:
        if i == len(atoms):
            yield binding
            return
        atom = atoms[i]
        for fact in facts:
            if fact.relation != atom.relation:
                continue
            trial = dict(binding)
            ok = True
            for term, value in ((atom.subject, fact.head), (atom.object, fact.tail)):
                if not is_variable(term):
                    ok = term == value
                elif trial.setdefault(term, value) != value:
                    ok = False
                if not ok:
                    break
            if ok:
                yield from walk(i + 1, trial)

    yield from walk(0, {})


def head_bindings(facts: set[Triple], head: Atom, atoms: Sequence[Atom]) -> set[tuple[str, ...]]:
    variables = [t for t in head.terms if is_variable(t)]
    return {tuple(s[v] for v in variables) for s in substitutions(facts, atoms)}


def brute_support(facts: set[Triple], atoms: Sequence[Atom]) -> int:
    return len(head_bindings(facts, atoms[0], [atoms[0], *atoms[1:]]))


def brute_body_size(facts: set[Triple], atoms: Sequence[Atom]) -> int:
    return len(head_bindings(facts, atoms[0], atoms[1:]))


def brute_pca_body_size(facts: set[Triple], atoms: Sequence[Atom], subject_side: bool) -> int:
    head = atoms[0]
    existential = (Atom(head.relation, head.subject, "?pca") if subject_side
                   else Atom(head.relation, "?pca", head.object))
    return len(head_bindings(facts, head, [*atoms[1:], existential]))


def brute_candidate_counts(
    facts: set[Triple], atoms: Sequence[Atom], shape: tuple[str, str]
) -> dict[str, int]:
    """Support of the rule plus one atom of each relation on ``shape`` (FRESH: a new variable)."""
    pairs: dict[tuple[str, str], set[str]] = {}
    out_rels: dict[str, set[str]] = {}
    in_rels: dict[str, set[str]] = {}
    for f in facts:
        pairs.setdefault((f.head, f.tail), set()).add(f.relation)
        out_rels.setdefault(f.head, set()).add(f.relation)
        in_rels.setdefault(f.tail, set()).add(f.relation)
    variables = [t for t in atoms[0].terms if is_variable(t)]
    found: dict[str, set[tuple[str, ...]]] = {}
    for sub in substitutions(facts, atoms):
        key = tuple(sub[v] for v in variables)
        if shape[0] == FRESH:
            relations = in_rels.get(sub[shape[1]], set())
        elif shape[1] == FRESH:
            relations = out_rels.get(sub[shape[0]], set())
        else:
            relations = pairs.get((sub[shape[0]], sub[shape[1]]), set())
        for rel in relations:
            found.setdefault(rel, set()).add(key)
    return {rel: len(keys) for rel, keys in found.items()}


def brute_side(facts: set[Triple], relation: str) -> Side:
    subjects = {f.head for f in facts if f.relation == relation}
    objects = {f.tail for f in facts if f.relation == relation}
    return Side.SUBJECT if len(subjects) >= len(objects) else Side.OBJECT


# ---- the hand-built KG -----------------------------------------------------------------------
# parent(x, y): x is a parent of y; mother is a sub-relation; child mostly the inverse of parent;
# sibling mostly symmetric; grandparent mostly parent∘parent.
TOY = [
    *(Triple(str(s), "parent", str(o)) for s, o in [(1, 3), (1, 4), (2, 3), (2, 4), (3, 5), (4, 6)]),
    *(Triple(str(s), "mother", str(o)) for s, o in [(2, 3), (2, 4), (4, 6)]),
    *(Triple(str(s), "child", str(o)) for s, o in [(3, 1), (4, 1), (3, 2), (5, 3)]),
    *(Triple(str(s), "sibling", str(o)) for s, o in [(3, 4), (4, 3), (5, 6)]),
    *(Triple(str(s), "grandparent", str(o)) for s, o in [(1, 5), (2, 5), (1, 6)]),
]

# rule -> (type, support, body size, PCA body size, functional side), worked out by hand
HAND = {
    # child facts (3,1) (4,1) (3,2) (5,3) all have parent(b,a): support 4 of |child| = 4.
    # body: the 6 reversed parent pairs. child has 3 subjects and 3 objects: a tie, so the
    # subject is functional; body pairs whose a in {3,4,5}: (3,1) (4,1) (3,2) (4,2) (5,3) -> 5
    "parent(?b,?a) => child(?a,?b)": (RuleType.INVERSION, 4, 6, 5, Side.SUBJECT),
    # mother is a subset of parent: support 3, body 3; parent: 4 subjects, 4 objects (tie)
    # and every mother subject is a parent subject: PCA body 3
    "mother(?a,?b) => parent(?a,?b)": (RuleType.HIERARCHY, 3, 3, 3, Side.SUBJECT),
    # sibling (3,4) (4,3) have their reverse, (5,6) not: support 2, body 3; tie -> subject;
    # of the body pairs (4,3) (3,4) (6,5) only 6 is no sibling subject: PCA body 2
    "sibling(?b,?a) => sibling(?a,?b)": (RuleType.SYMMETRY, 2, 3, 2, Side.SUBJECT),
    # parent paths 1>3>5 1>4>6 2>3>5 2>4>6: body (1,5) (1,6) (2,5) (2,6); 3 are grandparent
    # facts; grandparent: 2 subjects, 2 objects (tie), subjects 1 and 2: PCA body 4
    "parent(?a,?f) & parent(?f,?b) => grandparent(?a,?b)": (RuleType.COMPOSITION, 3, 4, 4, Side.SUBJECT),
    # a common parent f: f=1,2 give (3,3) (3,4) (4,3) (4,4); f=3 (5,5); f=4 (6,6): body 6;
    # siblings among them (3,4) (4,3): 2; PCA (subject side, a in {3,4,5}): 5 of the 6
    "parent(?f,?a) & parent(?f,?b) => sibling(?a,?b)": (RuleType.OTHER, 2, 6, 5, Side.SUBJECT),
    # recursive (the head relation in the body; a path, so a composition):
    # mother(a,f) & sibling(f,b): 2>3>4 and 2>4>3 give body (2,4) (2,3), both mother facts;
    # mother has 2 subjects and 3 objects, so the object is functional: b in {3,4,6}
    "mother(?a,?f) & sibling(?f,?b) => mother(?a,?b)": (RuleType.COMPOSITION, 2, 2, 2, Side.OBJECT),
    # grandparent(a,f) & parent(b,f): f=5 (grandchild of 1 and 2, child of 3) gives (1,3)
    # (2,3); f=6 (grandchild of 1, child of 4) gives (1,4): body 3, all parent facts;
    # parent is a tie (4 subjects, 4 objects) -> subject side, 1 and 2 are parents: PCA 3
    "grandparent(?a,?f) & parent(?b,?f) => parent(?a,?b)": (RuleType.OTHER, 3, 3, 3, Side.SUBJECT),
}


@pytest.fixture(scope="module")
def toy_engines(tmp_path_factory: pytest.TempPathFactory):
    store = OxigraphStore(str(tmp_path_factory.mktemp("toy") / "store"))
    store.load("toy", TOY, dataset="toy")
    engines = {"matrix": MatrixEngine(KGIndex(TOY)), "query": QueryEngine(store, "toy")}
    yield engines
    store.close()


def _atoms(rule: Rule) -> tuple[Atom, ...]:
    return (rule.head, *rule.body)


def assert_measures_by_brute_force(facts: set[Triple], rules: Sequence[MinedRule]) -> None:
    """Support, body size and PCA body size of each rule equal substitutions enumerated in Python."""
    for rule in rules:
        atoms = _atoms(rule.rule)
        subject_side = rule.functional_variable == rule.rule.head.subject
        assert rule.support == brute_support(facts, atoms)
        assert rule.body_size == brute_body_size(facts, atoms)
        assert rule.pca_body_size == brute_pca_body_size(facts, atoms, subject_side)


@pytest.mark.parametrize("engine", ["matrix", "query"])
@pytest.mark.parametrize("text", sorted(HAND))
def test_hand_computed_measures(text: str, engine: str, toy_engines: dict) -> None:
    kind, support, body, pca, side = HAND[text]
    rule = parse_rule(text)
    counter = toy_engines[engine]
    atoms = _atoms(rule)
    stats = counter.relation_stats()[rule.head.relation]
    assert rule.rule_type == kind
    assert stats.functional_side == side
    assert counter.body_size(atoms) == body
    assert counter.pca_body_size(atoms, side == Side.SUBJECT) == pca
    # support: the count of the last body atom as a candidate of the rule without it
    shape = (rule.body[-1].subject, rule.body[-1].object)
    shorter = (rule.head, *rule.body[:-1])
    assert counter.refinement_counts(shorter, [shape])[0].get(rule.body[-1].relation, 0) == support
    # the brute force agrees with the hand computation
    facts = set(TOY)
    assert (brute_support(facts, atoms), brute_body_size(facts, atoms),
            brute_pca_body_size(facts, atoms, side == Side.SUBJECT)) == (support, body, pca)


def _mined(**options) -> dict[Rule, object]:
    defaults = {"min_initial_support": 1}
    defaults.update(options)
    return {r.rule: r for r in mine(MatrixEngine(KGIndex(TOY)), MiningOptions(**defaults))}


def test_toy_rules_and_measures_with_amie_defaults() -> None:
    rules = _mined()
    inversion = rules[parse_rule("parent(?b,?a) => child(?a,?b)")]
    assert (inversion.support, inversion.body_size, inversion.pca_body_size) == (4, 6, 5)
    assert inversion.head_coverage == 1.0
    assert inversion.std_confidence == pytest.approx(4 / 6)
    assert inversion.pca_confidence == pytest.approx(4 / 5)
    assert inversion.functional_variable == "?a"
    assert parse_rule("parent(?a,?f) & parent(?f,?b) => grandparent(?a,?b)") in rules
    # mother's functional variable is its object (3 objects > 2 subjects)
    assert rules[parse_rule("mother(?a,?f) & sibling(?f,?b) => mother(?a,?b)")].functional_variable == "?b"


def test_min_initial_support_selects_heads() -> None:
    # parent has 6 facts, child 4, the others 3
    miner = Miner(MatrixEngine(KGIndex(TOY)), MiningOptions(min_initial_support=4))
    assert miner.heads() == ["child", "parent"]
    rules = _mined(min_initial_support=4)
    assert {r.head.relation for r in rules} <= {"child", "parent"}
    assert any(r.head.relation == "child" for r in rules)


def test_min_hc_prunes_candidates() -> None:
    # mother(b,a) => child(a,b): only child(3,2) is supported: support 1 of |child| = 4, hc 0.25
    # std 1/3, PCA 1/2 (body (3,2) (4,2) (6,4); a in {3,4,5}: 2)
    rule = parse_rule("mother(?b,?a) => child(?a,?b)")
    assert rule in _mined(min_hc=0.2)
    assert rule not in _mined(min_hc=0.3)  # needs support ceil(0.3 * 4) = 2


def test_support_threshold_is_amie_ceil() -> None:
    # AMIE keeps a candidate when support >= ceil(minhc * |head|), i.e. when hc >= minhc
    assert support_threshold(0.1, 1236) == 124  # 123.6
    assert support_threshold(0.1, 1230) == 123
    assert support_threshold(0.25, 4) == 1
    assert support_threshold(0.0, 10) == 0
    for size in range(1, 3000):
        threshold = support_threshold(0.1, size)
        assert threshold / size >= 0.1 > (threshold - 1) / size


def test_confidence_thresholds_filter_output() -> None:
    rule = parse_rule("parent(?b,?a) => child(?a,?b)")  # std 0.667, PCA 0.8
    assert rule in _mined(min_conf=0.6)
    assert rule not in _mined(min_conf=0.7)
    assert rule not in _mined(min_pca=0.81)


def test_skyline_on_and_off() -> None:
    # parent(b,a) & mother(b,a) => child(a,b): body (3,2) (4,2) (6,4), support 1 (child(3,2)),
    # std 1/3, PCA 1/2 (a in {3,4,5}: 2) -- not better than parent(b,a) => child(a,b) (0.8)
    rule = parse_rule("parent(?b,?a) & mother(?b,?a) => child(?a,?b)")
    assert rule not in _mined()
    assert rule in _mined(skyline=False)


def test_max_len_counts_the_head() -> None:
    rule = parse_rule("parent(?a,?f) & parent(?f,?b) => grandparent(?a,?b)")
    assert rule in _mined(max_len=3)
    assert rule not in _mined(max_len=2)
    assert all(len(r.body) == 1 for r in _mined(max_len=2))


def test_rules_of_pca_confidence_one_are_not_refined() -> None:
    # mother(a,b) => parent(a,b) and child(b,a) => parent(a,b) both have PCA confidence 1, so
    # mother(a,b) & child(b,a) => parent(a,b) (body (2,3), support 1, std = PCA = 1) is never
    # generated, even without the skyline; with the stop disabled (AMIE's -dpr) it is
    rule = parse_rule("mother(?a,?b) & child(?b,?a) => parent(?a,?b)")
    assert rule not in _mined(skyline=False)
    assert rule in _mined(skyline=False, perfect_stop=False)


def test_no_atom_repeats_the_head_and_recursivity_limit() -> None:
    rules = _mined(min_conf=0.0, min_pca=0.0, min_hc=0.0, skyline=False)
    for rule in rules:
        assert rule.head not in rule.body
        assert len(set(rule.body)) == len(rule.body)
    limited = _mined(min_conf=0.0, min_pca=0.0, min_hc=0.0, skyline=False, recursivity_limit=1)
    assert limited and all(a.relation != r.head.relation for r in limited for a in r.body)


def test_bad_options_are_refused() -> None:
    from kgengine.errors import KGEngineError

    for bad in ({"min_conf": 1.5}, {"min_hc": -0.1}, {"max_len": 1}, {"threads": 0}):
        with pytest.raises(KGEngineError):
            MiningOptions(**bad).validate()


# ---- random KGs: engines against brute force -------------------------------------------------
def random_kg(seed: int, entities: int = 9, relations: int = 4, facts: int = 45) -> list[Triple]:
    rng = random.Random(seed)
    names = [f"r{i}" for i in range(relations)]
    out = {Triple(f"e{rng.randrange(entities)}", rng.choice(names), f"e{rng.randrange(entities)}")
           for _ in range(facts)}
    return sorted(out)


def partial_rules(relations: list[str]) -> list[tuple[Atom, ...]]:
    """Every partial rule AMIE can reach with up to two body atoms over these relations
    (head r(?a,?b); atoms on existing variables or one fresh one)."""
    out: list[tuple[Atom, ...]] = []
    head = Atom(relations[0], "?a", "?b")
    out.append((head,))
    first = []
    for rel in relations:
        for s, o in [("?a", "?b"), ("?b", "?a"), ("?a", "?e"), ("?e", "?a"), ("?b", "?e"), ("?e", "?b")]:
            first.append(Atom(rel, s, o))
    for a1 in first:
        out.append((head, a1))
        names = sorted({v for v in (*head.terms, *a1.terms)})
        for rel in relations[:2]:
            for s, o in itertools.permutations([*names, "?f"], 2):
                if "?f" in (s, o) and len(names) == 3:
                    continue
                out.append((head, a1, Atom(rel, s, o)))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matrix_counts_match_brute_force(seed: int) -> None:
    triples = random_kg(seed)
    facts = set(triples)
    engine = MatrixEngine(KGIndex(triples))
    relations = sorted({t.relation for t in triples})
    stats = engine.relation_stats()
    for atoms in partial_rules(relations):
        side = stats[atoms[0].relation].functional_side
        assert side == brute_side(facts, atoms[0].relation)
        if len(atoms) > 1 and all(v in {x for a in atoms[1:] for x in a.variables}
                                  for v in atoms[0].variables):
            assert engine.body_size(atoms) == brute_body_size(facts, atoms), atoms
            assert engine.pca_body_size(atoms, side == Side.SUBJECT) == brute_pca_body_size(
                facts, atoms, side == Side.SUBJECT), atoms
        variables = sorted({v for a in atoms for v in a.variables})
        shapes = [(s, o) for s, o in itertools.permutations(variables, 2)]
        shapes += [(v, FRESH) for v in variables] + [(FRESH, v) for v in variables]
        for shape, counts in zip(shapes, engine.refinement_counts(atoms, shapes), strict=True):
            assert counts == brute_candidate_counts(facts, atoms, shape), (atoms, shape)


@pytest.mark.parametrize("seed", [4, 5])
def test_engines_mine_the_same_rules_on_random_kgs(seed: int, tmp_path: Path) -> None:
    triples = random_kg(seed, entities=12, relations=4, facts=70)
    store = OxigraphStore(str(tmp_path / "store"))
    try:
        store.load("rand", triples, dataset="rand")
        options = MiningOptions(min_initial_support=1, min_hc=0.05, min_conf=0.1, min_pca=0.1)
        by_matrix = mine(MatrixEngine(KGIndex(triples)), options)
        by_query = mine(QueryEngine(store, "rand"), options)
    finally:
        store.close()
    assert by_matrix, "the random KG should give some rules"
    assert [r.tsv_row() for r in by_matrix] == [r.tsv_row() for r in by_query]
    facts = set(triples)
    assert_measures_by_brute_force(facts, by_matrix)


@pytest.mark.slow
def test_constants_add_instantiated_atoms(toy_engines: dict) -> None:
    # with constants, atoms such as sibling(?b,4) become possible; every mined rule's measures
    # still match brute force, some rule has a constant, and both engines agree
    options = MiningOptions(min_initial_support=1, constants=True, min_hc=0.3, min_conf=0.3,
                            min_pca=0.3, skyline=False)
    rules = mine(toy_engines["matrix"], options)
    assert [r.tsv_row() for r in rules] == [r.tsv_row() for r in mine(toy_engines["query"], options)]
    facts = set(TOY)
    with_constant = [r for r in rules if any(not is_variable(t) for a in r.rule.body for t in a.terms)]
    assert with_constant
    for rule in rules:
        atoms = _atoms(rule.rule)
        assert rule.support == brute_support(facts, atoms), rule.rule
        assert rule.body_size == brute_body_size(facts, atoms), rule.rule


def test_cyclic_bodies_match_brute_force() -> None:
    """Bodies whose free variables form a cycle (rules of 5+ atoms): the engine fixes a variable
    of the cycle before message passing; counts must still be exact. (The last body: counted
    from the head object, a-f-l is a cycle; once, rows expanded by fixing f were taken as one
    per head binding and this PCA body size came out 7 instead of 6.)"""
    hit = random_kg(12, entities=8, relations=3, facts=30)
    engine = MatrixEngine(KGIndex(hit))
    atoms = (Atom("r1", "?a", "?b"), Atom("r1", "?a", "?f"), Atom("r2", "?f", "?b"),
             Atom("r2", "?a", "?l"), Atom("r2", "?l", "?f"))
    assert engine.pca_body_size(atoms, False) == brute_pca_body_size(set(hit), atoms, False) == 6
    triples = random_kg(11, entities=7, relations=3, facts=40)
    facts = set(triples)
    engine = MatrixEngine(KGIndex(triples))
    r = sorted({t.relation for t in triples})
    head = Atom(r[0], "?a", "?b")
    bodies = [
        # a - z, triangle z-w-v among free variables, v - b
        [Atom(r[1], "?a", "?z"), Atom(r[2], "?z", "?w"), Atom(r[0], "?w", "?v"),
         Atom(r[1], "?v", "?z"), Atom(r[2], "?v", "?b")],
        # square z-w-v-u
        [Atom(r[0], "?a", "?z"), Atom(r[1], "?z", "?w"), Atom(r[2], "?w", "?v"),
         Atom(r[1], "?v", "?u"), Atom(r[0], "?u", "?z"), Atom(r[2], "?u", "?b")],
    ]
    for body in bodies:
        atoms = (head, *body)
        assert engine.body_size(atoms) == brute_body_size(facts, atoms)
        for side in (True, False):
            assert engine.pca_body_size(atoms, side) == brute_pca_body_size(facts, atoms, side)
        shapes = [("?z", "?b"), ("?w", "?a"), ("?z", FRESH), ("?w", "?v")]
        for shape, counts in zip(shapes, engine.refinement_counts(atoms, shapes), strict=True):
            assert counts == brute_candidate_counts(facts, atoms, shape), shape


@pytest.mark.slow
def test_max_len_5_measures_match_brute_force() -> None:
    """Rules of 5 atoms, where free variables can form cycles (this found a real bug: rows
    expanded by a fixed variable were once taken as one per head binding)."""
    triples = random_kg(12, entities=8, relations=3, facts=30)
    options = MiningOptions(min_initial_support=1, min_hc=0.5, min_conf=0.2, min_pca=0.2,
                            max_len=5)
    rules = mine(MatrixEngine(KGIndex(triples)), options)
    assert any(len(r.rule.body) == 4 for r in rules)
    facts = set(triples)
    assert_measures_by_brute_force(facts, rules)
