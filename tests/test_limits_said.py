"""Limits said out loud (issue 22, item 3), through the real CLI on an on-disk store: a cut
output says what was cut and how to get all of it, counts are totals, a graph marked
'loading' is warned on or refused by every reader, an unknown relation is reported, and
`kgengine serve` answers an over-long GET with 414 (not the HTTP parser's 400) and fails on
a busy port before printing its banner."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from helpers.cli import KGENGINE, one_line_error
from helpers.cli import run_process as kgengine
from kgengine.oxigraph.store import OxigraphStore
from test_serve_support import free_port, serve

WAIT_S = 120.0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    location = tmp_path_factory.mktemp("limits") / "store"
    loaded = kgengine(location, "load", "family")
    assert loaded.returncode == 0, loaded.stderr
    return location


# ---- truncation and totals ----------------------------------------------------------------------
def test_neighbours_says_the_total_and_how_to_see_all(store: Path) -> None:
    cut = kgengine(store, "neighbours", "7", "--graph", "family", "--hops", "2", "--json")
    assert cut.returncode == 0, cut.stderr
    shown = json.loads(cut.stdout)
    every = kgengine(store, "neighbours", "7", "--graph", "family", "--hops", "2", "--json",
                     "--limit", "100000")
    total = len(json.loads(every.stdout))
    assert len(shown) == 200 < total
    assert f"200 of {total:,} triples within 2 hop(s) of 7" in cut.stderr
    assert f"--limit {total} shows all" in cut.stderr
    assert every.stderr.strip() == f"{total:,} triples within 2 hop(s) of 7"  # nothing cut: no notice
    filtered = kgengine(store, "neighbours", "7", "--graph", "family", "--hops", "3", "--relation", "wife",
                        "--limit", "5")
    assert "5 of " in filtered.stderr and "cut at --limit 5" in filtered.stderr


def test_groundings_count_is_the_total(store: Path) -> None:
    rule = "wife(?a,?b) => husband(?b,?a)"
    every = kgengine(store, "groundings", rule, "--graph", "family", "--json")
    total = len(json.loads(every.stdout)["groundings"])
    assert json.loads(every.stdout)["total"] == total > 5
    cut = kgengine(store, "groundings", rule, "--graph", "family", "--limit", "5")
    assert cut.returncode == 0, cut.stderr
    assert f"5 groundings shown of {total:,} (cut at --limit 5; leave it out for all)" in cut.stdout
    cut_json = json.loads(kgengine(store, "groundings", rule, "--graph", "family", "--limit", "5",
                                   "--json").stdout)
    assert len(cut_json["groundings"]) == 5 and cut_json["total"] == total


def test_groundings_unknown_relation(store: Path) -> None:
    body = kgengine(store, "groundings", "wief(?a,?b) => husband(?b,?a)", "--graph", "family")
    message = one_line_error(body)
    assert "relation 'wief' is not in graph 'family'" in message and "did you mean wife?" in message
    head = kgengine(store, "groundings", "wife(?a,?b) => husbnd(?b,?a)", "--graph", "family", "--limit", "1")
    assert head.returncode == 0
    assert "warning: head relation 'husbnd' is not in graph 'family'" in head.stderr
    assert "did you mean husband?" in head.stderr


# ---- a graph marked 'loading' ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def interrupted(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``store`` plus graph 'cut', whose load was killed while it was marked 'loading'."""
    big = tmp_path_factory.mktemp("cut") / "cut.tsv"
    with big.open("w") as out:
        for n in range(600_000):
            out.write(f"n{n}\tnext\tn{n + 1}\n")
    loader = subprocess.Popen([KGENGINE, "load", "tsv", "--path", str(big), "--graph", "cut",
                               "--store", str(store)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + WAIT_S
    try:
        while True:
            assert loader.poll() is None, "the load ended before it was seen loading"
            assert time.monotonic() < deadline, "the load was never seen loading"
            with OxigraphStore(str(store), read_only=True) as reader:  # a snapshot: no lock taken
                info = reader.graph_info("cut")
            if info is not None and info.status == "loading":
                break
            time.sleep(0.05)
    finally:
        loader.send_signal(signal.SIGKILL)
        loader.wait()
    yield store
    kgengine(store, "drop", "cut", "--yes")


def test_every_reader_warns_on_or_refuses_a_loading_graph(interrupted: Path) -> None:
    store = interrupted
    warning = "warning: graph 'cut' is incomplete"
    on_graph = kgengine(store, "query", "--graph", "cut", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert on_graph.returncode == 0 and warning in on_graph.stderr
    union = kgengine(store, "query", "ASK { ?s ?p ?o }")
    assert union.returncode == 0 and warning in union.stderr
    family_only = kgengine(store, "query", "--graph", "family", "ASK { ?s ?p ?o }")
    assert family_only.returncode == 0 and "warning" not in family_only.stderr
    entity = kgengine(store, "entity", "n1", "--graph", "cut", "--json")
    assert warning in entity.stderr
    stats = kgengine(store, "stats", "--graph", "cut")
    assert "warning: graph 'cut' is incomplete" in stats.stderr
    with serve(store, log_dir=store.parent) as server:  # the per-graph endpoint says it in a header
        ask = {"query": "ASK { ?s ?p ?o }"}
        partial = httpx.get(server.base + "/graph/cut/sparql", params=ask, timeout=30)
        whole = httpx.get(server.base + "/graph/family/sparql", params=ask, timeout=30)
    assert partial.status_code == 200 and "graph 'cut' is incomplete" in partial.headers["Warning"]
    assert whole.status_code == 200 and "Warning" not in whole.headers
    for refused in (kgengine(store, "neighbours", "n1", "--graph", "cut"),
                    kgengine(store, "groundings", "next(?a,?b) => next(?b,?a)", "--graph", "cut"),
                    kgengine(store, "export", "cut", "-o", str(store.parent / "cut.tsv"))):
        assert "graph 'cut' is incomplete" in one_line_error(refused)


# ---- kgengine serve ---------------------------------------------------------------------------------
def _get(port: int, query: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/sparql?" + urlencode({"query": query}))
    response = conn.getresponse()
    return response.status, response.read().decode()


def test_long_get_is_answered_or_414_with_the_limit(store: Path, tmp_path: Path) -> None:
    with serve(store, "--max-request-bytes", "300000", log_dir=tmp_path) as server:
        port = int(server.base.rsplit(":", 1)[1])
        padding = "ASK { e:7 r:wife ?w }" + " " * 150_000  # past httptools' 65,535-byte URLs
        assert _get(port, padding) == (200, _get(port, "ASK { e:7 r:wife ?w }")[1])
        for size in (400_000, 3_000_000):  # past the limit, and past what the app ever sees
            status, text = _get(port, "ASK {" + " " * size + "}")
            assert status == 414
            assert "limit of 300,000 bytes" in text and "POST" in text
        assert "Invalid HTTP request" not in server.log_text()


def test_busy_port_fails_before_the_banner(store: Path) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        result = subprocess.run([KGENGINE, "serve", "--store", str(store), "--port", str(port)],
                                capture_output=True, text=True, timeout=WAIT_S)
    message = one_line_error(result)
    assert f"cannot listen on 127.0.0.1:{port}" in message and "--port" in message
    assert "kgengine serve:" not in result.stdout + result.stderr
