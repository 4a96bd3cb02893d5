"""Backend parity: the same data in Oxigraph and in a real Neo4j, every named query twin
(``sparql/NAME.rq`` + ``cypher/NAME.cypher``) run on both with the parameters of
tests/parity_params.py, and the order-normalised results compared."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kgengine.loaders import read_dataset
from kgengine.model import Triple
from kgengine.neo4j_store import Neo4jStore
from kgengine.oxigraph.store import OxigraphStore
from kgengine.queries import query_names
from neo4j_server import Neo4jServer
from parity_params import PARAMS, Sample

FB15K_LINES = 20_000  # a FB15k-237 subset: every relation type, loads in seconds

# ids and relation names that need escaping in IRIs and in Cypher, labels of which only the
# first per entity counts, a label for an entity in no triple, a self-loop, a duplicate
AWKWARD_TRIPLES = [
    Triple("a b", "with space", "c"),
    Triple("x", "a`b", "y"),
    Triple("y", "x })-[:y]->(z) //", "x"),
    Triple("q'uote", "'\"", 'd"q'),
    Triple("u", "{{body}}", "v"),
    Triple("v", "{{rel:r}}", "u"),
    Triple("ü/ß", "ünï/code#frag?x=1", "ö%20"),
    Triple("self", "loop", "self"),
    Triple("x", "a`b", "y"),
    Triple("/m/0abc", "/film/film/genre", "/m/0xyz"),
    Triple("/m/0abc", "/film/film/genre", "a b"),
]
AWKWARD_LABELS = [("a b", "A B"), ("x", "first"), ("x", "second"), ("nowhere", "not in the KG"),
                  ("ü/ß", "ünïcödé")]
# relation labels likewise: names needing escapes, a second label (ignored), a relation in no triple
AWKWARD_RELATION_LABELS = [("with space", "has a space"), ("a`b", 'back`tick "q"'), ("a`b", "second"),
                           ("/film/film/genre", "film genre"), ("no such relation", "nowhere"),
                           ("ünï/code#frag?x=1", "ünï label\nwith a newline")]


def _names() -> list[str]:
    return sorted(set(query_names("sparql")) | set(query_names("cypher")))


def test_every_query_has_a_twin_and_parity_params() -> None:
    sparql, cypher = set(query_names("sparql")), set(query_names("cypher"))
    assert sparql - cypher == set(), "SPARQL queries without a Cypher twin"
    assert cypher - sparql == set(), "Cypher queries without a SPARQL twin"
    missing = sparql - set(PARAMS)
    assert not missing, f"add parameters for {sorted(missing)} to tests/parity_params.py"


def _sample(store: OxigraphStore, graph: str) -> Sample:
    stats = store.stats(graph)
    relations = sorted(stats.per_relation, key=lambda r: (-stats.per_relation[r], r))
    degree: Counter[str] = Counter()
    for t in store.triples(graph):
        degree[t.head] += 1
        degree[t.tail] += 1
    hubs = sorted(degree, key=lambda e: (-degree[e], e))[:3]
    others = random.Random(7).sample(sorted(degree), k=min(5, len(degree)))
    return Sample(graph, tuple(dict.fromkeys(hubs + others)), tuple(relations))


@pytest.fixture(scope="module")
def graphs(
    family_oxigraph: OxigraphStore,
    family_neo4j: dict[str, str],
    neo4j_store: Neo4jStore,
    neo4j_server: Neo4jServer,
    datasets_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[OxigraphStore, str, str, Sample]]]:
    """name -> (Oxigraph store, graph there, graph in Neo4j, sample)."""
    oxigraph = OxigraphStore(str(tmp_path_factory.mktemp("parity") / "store"))
    fb_dir = tmp_path_factory.mktemp("fb15k-237-subset")
    source = datasets_dir / "fb15k-237"
    with (source / "train.txt").open(encoding="utf-8", newline="") as fh:
        (fb_dir / "train.txt").write_text("".join(next(fh) for _ in range(FB15K_LINES)), newline="")
    (fb_dir / "entity2text.txt").symlink_to(source / "entity2text.txt")
    (fb_dir / "relation2text.txt").symlink_to(source / "relation2text.txt")
    fb = read_dataset("fb15k-237", fb_dir, ["train"])
    loaded = {"fb15k-237": (fb.triples, fb.labels, fb.relation_labels),
              "awkward": (AWKWARD_TRIPLES, AWKWARD_LABELS, AWKWARD_RELATION_LABELS)}
    out = {"family": (family_oxigraph, "family", family_neo4j["family"], _sample(family_oxigraph, "family"))}
    for name, (triples, labels, relation_labels) in loaded.items():
        oxigraph.load(name, triples, dataset=name, labels=labels, relation_labels=relation_labels)
        neo4j_store.load(neo4j_server.graph(name), triples, dataset=name, labels=labels,
                         relation_labels=relation_labels, replace=True)
        out[name] = (oxigraph, name, neo4j_server.graph(name), _sample(oxigraph, name))
    yield out
    oxigraph.close()


def _normalise(rows: list[dict[str, Any]]) -> Counter[str]:
    """Rows as a multiset, floats rounded (the backends may sum in another order)."""

    def value(v: Any) -> Any:
        return round(v, 9) if isinstance(v, float) else v

    return Counter(repr(sorted((k, value(v)) for k, v in row.items())) for row in rows)


@pytest.mark.neo4j
@pytest.mark.parametrize("graph", ["family", "fb15k-237", "awkward"])
@pytest.mark.parametrize("name", _names())
def test_twins_agree(name: str, graph: str, graphs: dict, neo4j_store: Neo4jStore) -> None:
    oxigraph, ox_graph, neo_graph, sample = graphs[graph]
    if name not in PARAMS:
        pytest.fail(f"no parity parameters for {name!r}: add them to tests/parity_params.py")
    cases = PARAMS[name](sample)
    assert cases, f"tests/parity_params.py gives {name!r} no case"
    for case in cases:
        if callable(case):
            expected, got = case(oxigraph, ox_graph), case(neo4j_store, neo_graph)
        else:
            expected = oxigraph.run(name, ox_graph, **case)
            got = neo4j_store.run(name, neo_graph, **case)
        assert _normalise(got) == _normalise(expected), (name, graph, case)
