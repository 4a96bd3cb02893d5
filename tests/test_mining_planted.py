"""Mining a Wikidata5m-shaped KG with planted rules (tests/synthetic_kg.py, small): every
planted rule that passes the thresholds is found with its exact measures (numpy set counts on
the generated facts, not the miner), sampled measures equal SPARQL counts on the store, and
the memory-bounding paths of the matrix engine (hub neighbour walks, halved blocks under a
tiny message budget) change no rule."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kgengine.mining import budget, candidate_counts
from kgengine.mining.graph_index import KGIndex
from kgengine.mining.matrix import MatrixEngine
from kgengine.mining.search import MiningOptions, counting_engine, mine
from kgengine.oxigraph.store import OxigraphStore
from synthetic_kg import planted_kg

OPTIONS = MiningOptions(max_len=3, threads=1)  # BRINK's thresholds; patches need one process


@pytest.fixture(scope="module")
def kg():
    return planted_kg(60_000, seed=3)


@pytest.fixture(scope="module")
def index(kg) -> KGIndex:
    return KGIndex(kg.iter_triples())


@pytest.fixture(scope="module")
def mined(index) -> list:
    return mine(MatrixEngine(index), OPTIONS)


def rows(rules: list) -> list[list[str]]:
    return [r.tsv_row() for r in rules]


def test_generator_plants_what_it_says(kg) -> None:
    # the hub relation is a hub: ~90% of the entities, the largest class holding a big share
    s, o = kg.pairs(31)
    assert 0.85 * kg.entities < len(s) <= kg.entities
    assert max((o == c).sum() for c in set(o[:200].tolist())) > 0.25 * len(s)
    expected = kg.expected()
    kinds = {p.kind for p in kg.planted if p.rule in expected}
    assert kinds == {"inverse", "hierarchy", "composition"}
    assert 0 < len(expected) < len(kg.planted)  # the keep=0.2 ones fail the confidence


def test_planted_rules_are_found_with_exact_measures(kg, mined) -> None:
    found = {r.rule: r for r in mined}
    for rule, m in kg.expected().items():
        assert rule in found, rule
        got = found[rule]
        assert (got.support, got.body_size, got.pca_body_size) == (m.support, m.body_size, m.pca_body_size)


def test_sampled_measures_equal_sparql_counts_on_the_store(kg, mined, tmp_path) -> None:
    """Support, body size and PCA body size of every other output rule, counted again by
    SPARQL on an Oxigraph store holding the graph (the query engine, independent of the
    matrix index)."""
    store = OxigraphStore(str(tmp_path / "store"))
    store.load("syn", list(kg.iter_triples()), dataset="synthetic")
    by_sparql = counting_engine(store, "syn", "query")
    checked = mined[::2]
    for rule in checked:
        head, body = rule.rule.head, rule.rule.body
        assert by_sparql.body_size((head, head, *body)) == rule.support, rule
        assert by_sparql.body_size((head, *body)) == rule.body_size, rule
        assert by_sparql.pca_body_size((head, *body), rule.functional_variable == head.subject) == (
            rule.pca_body_size), rule
    store.close()
    assert len(checked) >= 10



@pytest.mark.slow
def test_neighbour_walks_and_halved_blocks_change_no_rule(index, mined,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidate_counts, "_WALK_NEIGHBOURS", 0)  # never walk: build every value set
    assert rows(mine(MatrixEngine(index), OPTIONS)) == rows(mined)
    monkeypatch.setattr(candidate_counts, "_WALK_NEIGHBOURS", 10**9)  # walk whenever it may
    assert rows(mine(MatrixEngine(index), OPTIONS)) == rows(mined)
    halvings = []
    original = budget.in_blocks

    def counted(rows_, evaluate):
        def traced(block, whole):
            try:
                return evaluate(block, whole)
            except budget.MessageTooLarge:
                halvings.append(len(block))
                raise
        return original(rows_, traced)

    monkeypatch.setattr(budget, "MESSAGE_BUDGET", 500)
    monkeypatch.setattr(budget, "in_blocks", counted)
    assert rows(mine(MatrixEngine(index), replace(OPTIONS, max_len=3))) == rows(mined)
    assert len(halvings) > 20
