"""The same BRINK build on Neo4j as on Oxigraph: the store protocol and the rule queries are
all a build uses, and both backends order groundings alike, so a seed gives the same
dataset byte for byte; ``load_as`` loads both KGs into Neo4j and checks answerability there."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from kgengine.brink.build import BuildOptions, build_brink
from kgengine.loaders import read_dataset
from kgengine.mining.io import read_rules
from kgengine.oxigraph.store import OxigraphStore
from shared_data import SHARED

AMIE_RULES = SHARED / "reference" / "amie3" / "family_facts_len3.tsv"
COMPARED = ("kg_complete.tsv", "kg_incomplete.tsv", "questions_train.jsonl", "questions_valid.jsonl",
            "questions_test.jsonl", "rules.tsv")


@pytest.mark.neo4j
@pytest.mark.slow
def test_neo4j_build_equals_the_oxigraph_build(neo4j_server, neo4j_store, tmp_path: Path) -> None:
    # a slice of Family (the families of the entities numbered below 500) keeps Neo4j quick
    facts = [t for t in read_dataset("family", splits=["facts"]).triples
             if int(t.head) < 500 and int(t.tail) < 500]
    graph = neo4j_server.graph("brink-source")
    neo4j_store.load(graph, facts, dataset="family", replace=True)
    # rule shapes of the reference: inversions, compositions and "other" (two-atom) rules
    rules = read_rules(AMIE_RULES)[:10]
    options = BuildOptions(groundings_per_rule=6)
    with OxigraphStore(str(tmp_path / "store")) as oxigraph:
        oxigraph.load(graph, facts, dataset="family")
        ox = build_brink(oxigraph, graph, rules, tmp_path / "ox", options)
    neo = build_brink(neo4j_store, graph, rules, tmp_path / "neo",
                      replace(options, load_as=neo4j_server.graph("brink"), replace=True))
    assert ox.stats["questions"]["total"] > 20
    for name in COMPARED:
        assert (tmp_path / "ox" / name).read_bytes() == (tmp_path / "neo" / name).read_bytes(), name
    assert neo.answerability.fraction == 1.0 and neo.answerability.checked == len(neo.removal.kept)
    loaded = neo4j_store.graph_info(neo4j_server.graph("brink-incomplete"))
    assert loaded is not None and loaded.triples == ox.stats["triples"]["incomplete"]
