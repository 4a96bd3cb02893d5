"""The endpoint's datasets (docs/serve.md): /sparql's default graph is the union of every
graph, so a query repeats rows once Family and its facts variant are both loaded;
/graph/NAME/sparql and default-graph-uri=NAME give one graph's facts; the predeclared
prefixes work there as in `kgengine query`; and serve says it needs an Oxigraph store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from helpers.stores import write_family_store
from kgengine import terms
from kgengine.cli import main as cli
from test_serve_support import Server, serve

FACTS = Path(__file__).resolve().parents[1] / "engine" / "data" / "family"
HUSBANDS = "SELECT ?h ?w WHERE { ?h r:husband ?w }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = write_family_store(tmp_path_factory.mktemp("graphs") / "store")
    logs = tmp_path_factory.mktemp("logs")
    with serve(store, "--timeout", "20", "--workers", "1", log_dir=logs) as running:
        yield running


def husbands(splits: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for split in splits:
        for line in (FACTS / f"{split}.txt").read_text().splitlines():
            head, relation, tail = line.split("\t")
            if relation == "husband":
                pairs.append((terms.entity_iri(head), terms.entity_iri(tail)))
    return pairs


def rows(url: str, query: str, **params: str) -> list[tuple[str, ...]]:
    response = httpx.get(url, params={"query": query, **params},
                         headers={"Accept": "application/sparql-results+json"}, timeout=30)
    assert response.status_code == 200, response.text
    doc = response.json()
    names = doc["head"]["vars"]
    return [tuple(b[v]["value"] for v in names) for b in doc["results"]["bindings"]]


def test_the_union_default_graph_repeats_rows_of_variants(server: Server) -> None:
    everything = husbands(["facts", "train", "valid", "test"])
    union = rows(server.url, HUSBANDS)  # predeclared r: works on the endpoint
    # family (all splits) and family-facts (facts again): each fact twice
    assert sorted(union) == sorted(everything + husbands(["facts"]))


def test_a_per_graph_endpoint_serves_one_graph(server: Server) -> None:
    facts = husbands(["facts"])
    assert sorted(rows(server.base + "/graph/family-facts/sparql", HUSBANDS)) == sorted(facts)
    count = rows(server.base + "/graph/family-facts/sparql", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert count == [(str(len((FACTS / "facts.txt").read_text().splitlines())),)]  # no labels counted
    labelled = rows(server.base + "/graph/family-facts/sparql",
                    "SELECT (COUNT(DISTINCT ?e) AS ?n) WHERE { GRAPH labels: { ?e kg:privateId ?id } }")
    entities = {e for line in (FACTS / "facts.txt").read_text().splitlines() for e in line.split("\t")[::2]}
    assert labelled == [(str(len(entities)),)]


def test_default_graph_uri_by_name_is_the_protocol_dataset(server: Server) -> None:
    assert sorted(rows(server.url, HUSBANDS, **{"default-graph-uri": "family-facts"})) == sorted(
        husbands(["facts"]))
    # the protocol's dataset replaces the per-graph endpoint's own
    assert sorted(rows(server.base + "/graph/family-facts/sparql", HUSBANDS,
                       **{"default-graph-uri": "family"})) == sorted(
        husbands(["facts", "train", "valid", "test"]))


def test_an_unknown_graph_is_404(server: Server) -> None:
    response = httpx.get(server.base + "/graph/famly/sparql", params={"query": "ASK {}"}, timeout=30)
    assert response.status_code == 404 and "no graph 'famly'" in response.text


def test_serve_says_it_needs_an_oxigraph_store() -> None:
    help_text = CliRunner().invoke(cli, ["serve", "--help"]).output
    assert "neo4j://" not in help_text and "Oxigraph store" in help_text and "out of scope" in help_text
    result = CliRunner().invoke(cli, ["serve", "--store", "bolt://127.0.0.1:7687"])
    assert result.exit_code == 1
    assert "SPARQL over Neo4j's property graph is out of scope" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_per_graph_endpoint_follows_a_replaced_graph(tmp_path: Path) -> None:
    store, kg = tmp_path / "store", tmp_path / "kg.tsv"
    for lines in ("a\tr\tb\n", "a\tr\tb\nb\tr\tc\n"):
        kg.write_text(lines)
        loaded = CliRunner().invoke(cli, ["load", "tsv", "--path", str(kg), "--store", str(store),
                                          "--graph", "tiny", "--replace"])
        assert loaded.exit_code == 0, loaded.output
    with serve(store, "--workers", "1", log_dir=tmp_path) as running:
        url = running.base + "/graph/tiny/sparql"
        assert rows(url, "SELECT ?s ?o WHERE { ?s r:r ?o } ORDER BY ?s") == [
            (terms.entity_iri("a"), terms.entity_iri("b")), (terms.entity_iri("b"), terms.entity_iri("c"))]
        ids = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH labels: { ?e kg:privateId ?id } }"
        assert rows(url, ids) == [("3",)]
