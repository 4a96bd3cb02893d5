"""The two counting engines behind the miner give identical rules and measures: on a
FB15k-237 subset in Oxigraph, and on Neo4j (Family facts.txt, whose rules must also be AMIE 3's,
and the same FB15k-237 subset)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kgengine.loaders import read_dataset
from kgengine.mining import budget, candidate_counts
from kgengine.mining.candidate_counts import CandidateCounts
from kgengine.mining.graph_index import KGIndex
from kgengine.mining.groundings import HeadFilter, groundings
from kgengine.mining.io import MinedRule
from kgengine.mining.matrix import MatrixEngine
from kgengine.mining.search import MiningOptions, counting_engine, mine
from kgengine.oxigraph.store import OxigraphStore
from test_mining_amie_parity import BRINK, assert_same_as_amie
from test_mining_small import assert_measures_by_brute_force

# A FB15k-237 subset small enough for the query engine: the train.txt lines (CRLF endings, as
# distributed) of the 8 /olympics/ relations, ~5,900 triples that give a dozen rules
FB_DOMAIN = "/olympics/"
FB_OPTIONS = MiningOptions(max_len=3)


@pytest.fixture(scope="module")
def fb_subset(datasets_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """(dataset, Oxigraph store holding it as graph 'fb')."""
    folder = tmp_path_factory.mktemp("fb15k-237-subset")
    with (datasets_dir / "fb15k-237" / "train.txt").open(encoding="utf-8", newline="") as fh:
        lines = [line for line in fh if line.split("\t")[1].startswith(FB_DOMAIN)]
    assert lines[0].endswith("\r\n")
    (folder / "train.txt").write_text("".join(lines), encoding="utf-8", newline="")
    data = read_dataset("fb15k-237", folder, ["train"])
    store = OxigraphStore(str(tmp_path_factory.mktemp("fb-store") / "store"))
    store.load("fb", data.triples, dataset="fb15k-237")
    yield data, store
    store.close()


def rows(rules: list[MinedRule]) -> list[list[str]]:
    return [r.tsv_row() for r in rules]


@pytest.mark.slow
def test_engines_agree_on_fb15k237_subset(fb_subset) -> None:
    data, store = fb_subset
    triples = list(data.triples)
    by_matrix = mine(MatrixEngine(KGIndex(triples)), FB_OPTIONS)
    by_query = mine(counting_engine(store, "fb", "query"), replace(FB_OPTIONS, threads=2))
    assert len(by_matrix) >= 10
    assert rows(by_matrix) == rows(by_query)
    assert_measures_by_brute_force(set(triples), by_matrix[::5])  # spot checks


@pytest.mark.slow
def test_blocked_counting_at_length_4_changes_no_rule(fb_subset, monkeypatch: pytest.MonkeyPatch) -> None:
    """At max-len 4 the matrix engine counts big heads in blocks of head bindings and closes
    two unrelated fresh variables relation by relation where fixing one of them would pair too
    many values (memory bounds): with tiny blocks and that path forced, every head relation is
    split, and the rules (the same as with the default paths), and their measures against
    substitutions enumerated in Python, stay the same. The default run counts the length-3
    rules with the compiled chain kernel, the blocked one through the general path: the same
    rules either way."""
    data, store = fb_subset
    triples = list(data.triples)
    # one thread: forked mining workers would not see the patched block size nor the counter
    options = replace(FB_OPTIONS, max_len=4, threads=1)
    whole = mine(MatrixEngine(KGIndex(triples)), options)
    monkeypatch.setattr(budget, "CHUNK_ROWS", 64)
    monkeypatch.setattr(candidate_counts, "_FIX_FREE_PAIRS", 0)  # the relation-by-relation path
    free_pairs = []
    original = CandidateCounts._free_pair_counts

    def counted(self: CandidateCounts, *args: Any, **kwargs: Any) -> dict[str, int]:
        free_pairs.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CandidateCounts, "_free_pair_counts", counted)
    # the general path only: the chain kernel (which ``whole`` used) would count these rules
    monkeypatch.setattr(MatrixEngine, "_from_chains", lambda self, atoms, shapes, rest, *_: rest)
    blocked = mine(MatrixEngine(KGIndex(triples)), options)
    assert free_pairs, "no closing atom between two unrelated variables was counted"
    assert rows(blocked) == rows(whole)
    long_rules = [r for r in whole if r.rule.length == 4]
    assert len(long_rules) >= 40
    by_query = counting_engine(store, "fb", "query")  # SPARQL counts on the store, independently
    for rule in long_rules[::8]:
        head = rule.rule.head
        atoms = (head, *rule.rule.body)
        subject_side = rule.functional_variable == head.subject
        pairs = {(row[head.subject[1:]], row[head.object[1:]])
                 for row in groundings(store, "fb", rule.rule, head=HeadFilter.WITH)}
        assert rule.support == len(pairs)
        assert rule.body_size == by_query.body_size(atoms)
        assert rule.pca_body_size == by_query.pca_body_size(atoms, subject_side)


@pytest.mark.slow
def test_parallel_workers_give_the_same_rules(family_oxigraph) -> None:
    engine = counting_engine(family_oxigraph, "family", "matrix")
    one = mine(engine, BRINK)
    assert rows(mine(engine, replace(BRINK, threads=2))) == rows(one)


@pytest.mark.neo4j
@pytest.mark.slow
def test_query_engine_on_neo4j_reproduces_amie3(neo4j_store, family_neo4j) -> None:
    engine = counting_engine(neo4j_store, family_neo4j["family-facts"], "query")
    assert engine.language == "cypher"
    assert_same_as_amie(mine(engine, replace(BRINK, threads=2)))


@pytest.mark.neo4j
@pytest.mark.slow
def test_engines_agree_on_neo4j_fb15k237_subset(fb_subset, neo4j_store, neo4j_server) -> None:
    data, _ = fb_subset
    graph = neo4j_server.graph("mining-fb")
    neo4j_store.load(graph, data.triples, dataset="fb15k-237", replace=True)
    by_neo4j = mine(counting_engine(neo4j_store, graph, "query"), replace(FB_OPTIONS, threads=2))
    by_index = mine(counting_engine(neo4j_store, graph, "matrix"), FB_OPTIONS)
    assert len(by_index) >= 10
    assert rows(by_neo4j) == rows(by_index) == rows(mine(MatrixEngine(KGIndex(data.triples)), FB_OPTIONS))
