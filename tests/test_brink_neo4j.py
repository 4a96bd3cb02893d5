"""The same BRINK build on Neo4j as on Oxigraph: the store protocol and the rule queries are
all a build uses, and both backends order groundings alike, so a seed gives the same
dataset byte for byte; ``load_as`` loads both KGs into Neo4j and checks answerability there."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED
from kgengine.brink.build import BuildOptions, build_brink
from kgengine.mining.io import read_rules

AMIE_RULES = SHARED / "reference" / "amie3" / "family_facts_len3.tsv"
COMPARED = ("kg_complete.tsv", "kg_incomplete.tsv", "questions_train.jsonl", "questions_valid.jsonl",
            "questions_test.jsonl", "rules.tsv")


@pytest.mark.neo4j
@pytest.mark.slow
def test_neo4j_build_equals_the_oxigraph_build(neo4j_server, neo4j_store, neo4j_family, family_store,
                                               tmp_path: Path) -> None:
    # every rule shape of the reference: the six inversions and the first composition/other rules
    rules = read_rules(AMIE_RULES)[:30]
    ox = build_brink(family_store, "family-facts", rules, tmp_path / "ox", BuildOptions(workers=2))
    neo = build_brink(neo4j_store, neo4j_family["family-facts"], rules, tmp_path / "neo",
                      BuildOptions(workers=1, load_as=neo4j_server.graph("brink"), replace=True))
    for name in COMPARED:
        assert (tmp_path / "ox" / name).read_bytes() == (tmp_path / "neo" / name).read_bytes(), name
    assert neo.answerability.fraction == 1.0 and neo.answerability.checked == len(neo.removal.kept)
    loaded = neo4j_store.graph_info(neo4j_server.graph("brink-incomplete"))
    assert loaded is not None and loaded.triples == ox.stats["triples"]["incomplete"]
