"""`kgengine query --cypher --timeout` stops a runaway Cypher query on a real Neo4j, in a real
process, with the same message as for SPARQL."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from click.testing import CliRunner
from helpers.cli import KGENGINE
from kgengine.cli import main
from neo4j_server import Neo4jServer

pytestmark = pytest.mark.neo4j

# every triple of entities of the graph: 3,007^3 rows to count, far beyond any timeout here
RUNAWAY = ("MATCH (a:Entity {graph: $graph}), (b:Entity {graph: $graph}), (c:Entity {graph: $graph}) "
           "RETURN count(*) AS n")


def test_timeout_stops_a_runaway_cypher_query(neo4j_server: Neo4jServer) -> None:
    env = {**os.environ, "NEO4J_USER": neo4j_server.user, "NEO4J_PASSWORD": neo4j_server.password}
    graph = neo4j_server.graph("query-timeout")
    loaded = CliRunner(env=env).invoke(main, ["load", "family", "--splits", "facts", "--graph", graph,
                                              "--replace", "--store", neo4j_server.uri])
    assert loaded.exit_code == 0, loaded.output
    started = time.monotonic()
    out = subprocess.run([KGENGINE, "query", "--cypher", "--graph", graph, "--timeout", "2",
                          "--store", neo4j_server.uri, RUNAWAY], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip() == "Error: query stopped after 2 s (--timeout 2)"
    assert time.monotonic() - started < 30
    quick = subprocess.run([KGENGINE, "query", "--cypher", "--graph", graph, "--timeout", "60", "--format",
                            "csv", "--store", neo4j_server.uri,
                            "MATCH (e:Entity {graph: $graph, id: '7'}) RETURN e.id AS id"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert quick.returncode == 0 and quick.stdout.splitlines() == ["id", "7"], quick.stderr
