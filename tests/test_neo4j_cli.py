"""The CLI against a real Neo4j: every --store command takes a Neo4j URI (credentials from
the environment), `kgengine query` runs Cypher there with --cypher."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result
from kgengine.cli import main
from neo4j_server import Neo4jServer
from store_oracles import raw_family

pytestmark = pytest.mark.neo4j


@pytest.fixture
def cli(neo4j_server: Neo4jServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NEO4J_USER", neo4j_server.user)
    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_server.password)
    monkeypatch.setenv("COLUMNS", "250")  # rich tables would wrap the long test graph names

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, [*args, "--store", neo4j_server.uri], catch_exceptions=False)

    return invoke


def test_load_stats_graphs_query_drop(cli, neo4j_server: Neo4jServer) -> None:
    graph = neo4j_server.graph("cli-family")
    result = cli("load", "family", "--graph", graph, "--splits", "facts", "--replace")
    assert result.exit_code == 0, result.output
    assert "17,615 triples" in result.output

    result = cli("stats", "--graph", graph, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[graph]["triples"] == 17_615

    result = cli("graphs")
    assert result.exit_code == 0 and graph in result.output

    result = cli("query", "--cypher", "--graph", graph, "--format", "json",
                 "MATCH (e:Entity {graph: $graph, id: '7'})-[x]->() RETURN count(x) AS n")
    assert result.exit_code == 0, result.output
    expected = sum(1 for t in raw_family(["facts"]) if t.head == "7")
    assert json.loads(result.output) == [{"n": str(expected)}]  # cells are printed as text

    result = cli("query", "SELECT * WHERE { ?s ?p ?o }")
    assert result.exit_code != 0 and "--cypher" in result.output

    result = cli("query", "--cypher", "CREATE (n:Intruder) RETURN n")
    assert result.exit_code != 0  # users' Cypher runs in read transactions

    result = cli("drop", graph, "--yes")
    assert result.exit_code == 0, result.output


def test_wrong_password_is_one_line(neo4j_server: Neo4jServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_USER", neo4j_server.user)
    monkeypatch.setenv("NEO4J_PASSWORD", "wrong-password")
    result = CliRunner().invoke(main, ["graphs", "--store", neo4j_server.uri])
    assert result.exit_code == 1
    assert "refused the credentials" in result.output and "Traceback" not in result.output
