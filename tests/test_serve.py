"""`kgengine serve` against real clients (SPARQLWrapper, rdflib's SPARQLStore, raw HTTP):
each result format, equality with `kgengine query` on the same store, the protocol's error
statuses, the safety limits, the service description, and serving while a writer loads."""

from __future__ import annotations

import csv
import http.client
import io
import json
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from xml.dom.minidom import Document

import httpx
import pytest
import rdflib
from click.testing import CliRunner
from helpers.cli import KGENGINE, json_output, run_cli
from helpers.stores import write_family_store
from kgengine import terms
from kgengine.cli import main as cli
from rdflib.plugins.stores.sparqlstore import SPARQLStore
from SPARQLWrapper import (
    CSV,
    JSON,
    JSONLD,
    POST,
    POSTDIRECTLY,
    RDFXML,
    TSV,
    TURTLE,
    URLENCODED,
    XML,
    SPARQLWrapper,
)
from test_serve_support import Server, serve

R = terms.RELATION_NS
FAMILY = terms.graph_iri("family")
MAX_ROWS = 5000
SELECTS = {
    "iris": f"SELECT ?h ?t WHERE {{ ?h <{R}husband> ?t . ?t <{R}wife> ?h }} ORDER BY ?h ?t LIMIT 40",
    "literals": f"SELECT ?e ?p WHERE {{ GRAPH <{FAMILY}/entities> {{ ?e <{terms.VOCAB_NS}privateId> ?p }} }} "
                "ORDER BY ?e LIMIT 30",
    "typed": f"SELECT ?r (COUNT(*) AS ?n) WHERE {{ GRAPH <{FAMILY}> {{ ?h ?r ?t }} }} "
             "GROUP BY ?r ORDER BY ?r",
    "unbound": f"SELECT ?h ?x WHERE {{ ?h <{R}son> ?t OPTIONAL {{ ?h <{R}nothing> ?x }} }} "
               "ORDER BY ?h LIMIT 5",
}
ASK_TRUE = f"ASK {{ ?h <{R}husband> ?t }}"
ASK_FALSE = f"ASK {{ ?h <{R}husband> ?h }}"
CONSTRUCT = f"CONSTRUCT {{ ?t <{R}has_husband> ?h }} WHERE {{ ?h <{R}husband> ?t }} ORDER BY ?h LIMIT 25"


@pytest.fixture(scope="module")
def server(family_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serve(family_dir, "--timeout", "20", "--max-rows", str(MAX_ROWS), "--max-request-bytes", "16384",
               log_dir=tmp_path_factory.mktemp("logs")) as running:
        yield running


def kgengine_query(family_dir: Path, query: str) -> Any:
    """What `kgengine query --format json` prints for ``query`` on the same store."""
    result = run_cli("query", query, "--store", str(family_dir), "--format", "json")
    assert result.exit_code == 0, result.output
    return json_output(result)  # stderr may warn (a relation not in the store, on purpose)


def _rows_from_json(doc: dict[str, Any]) -> list[dict[str, str]]:
    names = doc["head"]["vars"]
    return [{v: b[v]["value"] if v in b else "" for v in names} for b in doc["results"]["bindings"]]


def _rows_from_xml(doc: Document) -> list[dict[str, str]]:
    names = [v.getAttribute("name") for v in doc.getElementsByTagName("variable")]
    rows = []
    for result in doc.getElementsByTagName("result"):
        row = dict.fromkeys(names, "")
        for binding in result.getElementsByTagName("binding"):
            value = binding.firstChild
            row[binding.getAttribute("name")] = value.firstChild.data if value.firstChild else ""  # type: ignore[union-attr]
        rows.append(row)
    return rows


def _rows_from_csv(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def _tsv_value(cell: str) -> str:
    if cell.startswith("<") and cell.endswith(">"):
        return cell[1:-1]
    if cell.startswith('"'):
        return cell[1:cell.rindex('"')]
    return cell  # bare numbers and booleans


def _rows_from_tsv(data: bytes) -> list[dict[str, str]]:
    lines = data.decode().split("\n")
    names = [h.lstrip("?") for h in lines[0].split("\t")]
    rows = (line.split("\t") for line in lines[1:] if line)
    return [dict(zip(names, (_tsv_value(c) for c in cells), strict=True)) for cells in rows]


def wrapper(server: Server, query: str, fmt: str, method: str = "GET", request: str = URLENCODED) -> Any:
    sw = SPARQLWrapper(server.url)
    sw.setQuery(query)
    sw.setReturnFormat(fmt)
    if method == POST:
        sw.setMethod(POST)
        sw.setRequestMethod(request)
    return sw.query().convert()


# ---- real clients, every format, same answers as `kgengine query` ------------------------
@pytest.mark.parametrize("name", sorted(SELECTS))
@pytest.mark.parametrize("fmt", [JSON, XML, CSV, TSV])
def test_sparqlwrapper_select_equals_kgengine_query(server: Server, family_dir: Path, name: str,
                                                    fmt: str) -> None:
    query = SELECTS[name]
    expected = kgengine_query(family_dir, query)
    assert expected, "the query should have rows"
    got = wrapper(server, query, fmt)
    parse = {JSON: _rows_from_json, XML: _rows_from_xml, CSV: _rows_from_csv, TSV: _rows_from_tsv}[fmt]
    assert parse(got) == expected


@pytest.mark.parametrize("method,request_method",
                         [("GET", URLENCODED), (POST, URLENCODED), (POST, POSTDIRECTLY)])
def test_sparqlwrapper_methods(server: Server, family_dir: Path, method: str, request_method: str) -> None:
    query = SELECTS["iris"]
    got = wrapper(server, query, JSON, method, request_method)
    assert _rows_from_json(got) == kgengine_query(family_dir, query)


@pytest.mark.parametrize("fmt", [JSON, XML])
def test_sparqlwrapper_ask(server: Server, family_dir: Path, fmt: str) -> None:
    for query in (ASK_TRUE, ASK_FALSE):
        expected = kgengine_query(family_dir, query)["boolean"]
        got = wrapper(server, query, fmt)
        if fmt == JSON:
            value = got["boolean"]
        else:
            value = got.getElementsByTagName("boolean")[0].firstChild.data == "true"
        assert value is expected


def _triples_from_kgengine(family_dir: Path, query: str) -> set[tuple[str, str, str]]:
    return {(r["subject"], r["predicate"], r["object"]) for r in kgengine_query(family_dir, query)}


def _triples(graph: rdflib.Graph) -> set[tuple[str, str, str]]:
    return {(str(s), str(p), str(o)) for s, p, o in graph}


@pytest.mark.parametrize("fmt", [TURTLE, RDFXML, JSONLD])
def test_sparqlwrapper_construct(server: Server, family_dir: Path, fmt: str) -> None:
    expected = _triples_from_kgengine(family_dir, CONSTRUCT)
    assert len(expected) > 10  # duplicates (a fact in two graphs) collapse in a graph
    got = wrapper(server, CONSTRUCT, fmt)
    graph = rdflib.Graph().parse(data=got, format="turtle") if isinstance(got, bytes) else got
    assert _triples(graph) == expected


@pytest.mark.parametrize("fmt", ["json", "xml", "csv", "tsv"])
def test_rdflib_sparqlstore(server: Server, family_dir: Path, fmt: str) -> None:
    graph = rdflib.Graph(store=SPARQLStore(server.url, returnFormat=fmt))
    query = SELECTS["iris"]
    rows = [{str(k): str(v) for k, v in row.asdict().items()} for row in graph.query(query)]
    assert rows == kgengine_query(family_dir, query)
    if fmt in ("json", "xml"):  # CSV/TSV have no boolean results
        assert graph.query(ASK_TRUE).askAnswer is True
        assert graph.query(ASK_FALSE).askAnswer is False
    assert _triples(graph.query(CONSTRUCT).graph) == _triples_from_kgengine(family_dir, CONSTRUCT)


def test_kgengine_query_cli_runs_while_serving(server: Server, family_dir: Path) -> None:
    """The server holds no lock: the real CLI, in its own process, opens the same store."""
    out = subprocess.run([KGENGINE, "query", ASK_TRUE, "--store", str(family_dir), "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"boolean": True}


# ---- datasets ------------------------------------------------------------------------------
def _count(server: Server, query: str, params: dict[str, Any] | None = None) -> int:
    response = httpx.get(server.url, params={"query": query, **(params or {})},
                         headers={"Accept": "application/sparql-results+json"}, timeout=30)
    assert response.status_code == 200, response.text
    return int(response.json()["results"]["bindings"][0]["n"]["value"])


def test_default_graph_is_the_union_like_kgengine_query(server: Server, family_dir: Path) -> None:
    query = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    union = _count(server, query)
    assert union == int(kgengine_query(family_dir, query)[0]["n"])
    assert union > 28_356 + 17_615  # both KG graphs, their entity graphs and the metadata


def test_protocol_and_query_datasets(server: Server) -> None:
    count = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
    assert _count(server, count, {"default-graph-uri": terms.graph_iri("family-facts")}) == 17_615
    assert _count(server, count, {"default-graph-uri": "family-facts"}) == 17_615  # a bare graph name
    both = [terms.graph_iri("family"), terms.graph_iri("family-facts")]
    # Oxigraph's default graph over several graphs keeps a triple once per graph it is in
    assert _count(server, count, {"default-graph-uri": both}) == 28_356 + 17_615
    # the query's own FROM is respected (the union default does not override it) ...
    from_facts = f"SELECT (COUNT(*) AS ?n) FROM <{terms.graph_iri('family-facts')}> WHERE {{ ?s ?p ?o }}"
    assert _count(server, from_facts) == 17_615
    # ... and the protocol's dataset wins over FROM (SPARQL 1.1 Protocol 2.1.4)
    assert _count(server, from_facts, {"default-graph-uri": FAMILY}) == 28_356
    named = "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"
    assert _count(server, named, {"named-graph-uri": FAMILY}) == 1
    bad = httpx.get(server.url, params={"query": "ASK {}", "default-graph-uri": "http://a b"}, timeout=10)
    assert bad.status_code == 400 and "IRI" in bad.text


# ---- errors and limits -------------------------------------------------------------------
def _no_trace(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text


def test_syntax_error_is_400_with_the_parser_message(server: Server) -> None:
    response = httpx.get(server.url, params={"query": "SELECT * WHERE { ?s ?p"}, timeout=10)
    assert response.status_code == 400
    assert response.text.startswith("error at 1:")
    _no_trace(response.text)


@pytest.mark.parametrize(
    "method,content_type,body,params,status",
    [
        ("PUT", "application/sparql-query", "ASK {}", {}, 405),
        ("POST", "text/plain", "ASK {}", {}, 415),
        ("POST", None, "query=ASK%20%7B%7D", {}, 415),
        ("POST", "application/sparql-query; charset=UTF-16", "ASK {}", {}, 415),
        ("POST", "application/sparql-query", b"ASK { \xff }", {}, 400),
        ("GET", None, None, {"query": ["ASK {}", "ASK {}"]}, 400),
        ("GET", None, None, {"update": "CLEAR ALL"}, 400),
        ("POST", "application/x-www-form-urlencoded", "query=ASK%20%7B%7D&update=CLEAR%20ALL", {}, 400),
        ("POST", "application/x-www-form-urlencoded", "nothing=here", {}, 400),
        ("POST", "application/sparql-update", "CLEAR ALL", {}, 403),
        ("POST", "application/x-www-form-urlencoded", "update=CLEAR%20ALL", {}, 403),
        ("GET", None, None, {"query": "ASK {}", "using-graph-uri": FAMILY}, 400),
        ("GET", None, None, {"query": "SELECT * { SERVICE <http://127.0.0.1:9/> { ?s ?p ?o } }"}, 403),
        ("POST", "application/sparql-query", "ASK {" + " " * 20_000 + "}", {}, 413),
    ],
)
def test_protocol_errors(server: Server, method: str, content_type: str | None, body: Any,
                         params: dict[str, Any], status: int) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = httpx.request(method, server.url, params=params, content=body, headers=headers, timeout=10)
    assert response.status_code == status, response.text
    _no_trace(response.text)


def test_overlong_url_is_414(server: Server) -> None:
    # over a plain connection: httpx refuses long URLs itself (and past ~64 KiB the HTTP
    # parser answers 400 before the server sees the request)
    conn = http.client.HTTPConnection("127.0.0.1", int(server.base.rsplit(":", 1)[1]), timeout=10)
    conn.request("GET", "/sparql?" + urlencode({"query": "ASK {" + " " * 20_000 + "}"}))
    assert conn.getresponse().status == 414


def test_store_left_untouched_by_refused_updates(server: Server) -> None:
    assert httpx.post(server.url, content="CLEAR ALL", headers={"Content-Type": "application/sparql-update"},
                      timeout=10).status_code == 403
    assert _count(server, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }") > 0


def test_row_cap_is_signalled(server: Server) -> None:
    query = "SELECT ?s ?p ?o WHERE { ?s ?p ?o }"
    for accept in ("application/sparql-results+json", "application/sparql-results+xml", "text/csv"):
        response = httpx.get(server.url, params={"query": query}, headers={"Accept": accept}, timeout=30)
        assert response.status_code == 200
        assert response.headers["X-SPARQL-Truncated"] == f"max-rows={MAX_ROWS}"
    doc = httpx.get(server.url, params={"query": query}, timeout=30).json()
    assert len(doc["results"]["bindings"]) == MAX_ROWS
    assert doc["head"]["link"] == [f"urn:kgengine:truncated:max-rows={MAX_ROWS}"]
    triples = httpx.get(server.url, params={"query": "CONSTRUCT WHERE { ?s ?p ?o }"},
                        headers={"Accept": "application/n-triples"}, timeout=30)
    lines = triples.text.splitlines()
    assert len(lines) == MAX_ROWS + 1 and lines[-1].startswith("# truncated by the server")
    small = httpx.get(server.url, params={"query": SELECTS["iris"]}, timeout=10)
    assert "X-SPARQL-Truncated" not in small.headers


# ---- service description, page, health ---------------------------------------------------
def test_service_description(server: Server) -> None:
    response = httpx.get(server.url, headers={"Accept": "text/turtle"}, timeout=10)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/turtle")
    graph = rdflib.Graph().parse(data=response.text, format="turtle")
    sd = rdflib.Namespace("http://www.w3.org/ns/sparql-service-description#")
    assert (None, sd.endpoint, rdflib.URIRef(server.url)) in graph
    assert (None, sd.supportedLanguage, sd.SPARQL11Query) in graph
    assert (None, sd.supportedLanguage, sd.SPARQL11Update) not in graph  # read-only
    assert {str(n) for n in graph.objects(None, sd.name)} >= {FAMILY, terms.graph_iri("family-facts")}
    xml = httpx.get(server.url, headers={"Accept": "application/rdf+xml"}, timeout=10)
    assert len(rdflib.Graph().parse(data=xml.text, format="xml")) == len(graph)


def test_html_page_and_health(server: Server) -> None:
    page = httpx.get(server.base + "/", timeout=10)
    assert page.status_code == 200 and "<form" in page.text and "text/html" in page.headers["content-type"]
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    assert "<form" in httpx.get(server.url, headers={"Accept": browser}, timeout=10).text
    health = server.health()
    assert health["status"] == "ok" and health["read_only"] is True
    assert health["pool"]["alive"] == health["pool"]["workers"] >= 2


# ---- serving while a writer works ---------------------------------------------------------
def test_load_while_serving_then_reload(tmp_path: Path) -> None:
    """The server opens the store read-only and takes no lock: `kgengine load` (another
    process) writes while it serves; the server answers from what it opened, and SIGHUP
    makes fresh workers that see the new graph."""
    store = write_family_store(tmp_path / "store")
    extra = tmp_path / "extra.tsv"
    extra.write_text("a\tlikes\tb\nb\tlikes\tc\n")
    graphs = "SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"
    stale = tmp_path / ".store.serve" / "999999999-1"  # left by a server that was killed
    stale.mkdir(parents=True)
    with serve(store, log_dir=tmp_path) as server:
        snapshot = Path(server.health()["snapshot"])
        assert snapshot.parent == tmp_path / ".store.serve" and not stale.exists()
        before = _count(server, graphs)
        load = subprocess.run([KGENGINE, "load", "tsv", "--path", str(extra), "--store", str(store),
                               "--graph", "extra"], capture_output=True, text=True, timeout=120)
        assert load.returncode == 0, load.stderr
        assert _count(server, graphs) == before  # the workers' snapshot
        old = server.health()["pool"]["generation"]
        server.reload()
        deadline = time.monotonic() + 30
        while server.health()["pool"]["generation"] == old or _count(server, graphs) == before:
            assert time.monotonic() < deadline, "the reload did not show the new graph"
            time.sleep(0.2)
        assert _count(server, graphs) == before + 2  # extra and extra/entities
        assert _count(server, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
                      {"default-graph-uri": "extra"}) == 2
        assert not snapshot.exists()  # the first snapshot went once its workers had exited
    assert not (tmp_path / ".store.serve").exists()  # and the server cleans up after itself


@pytest.mark.parametrize(
    "args,message",
    [
        (["--store", "/nonexistent/store"], "no kgengine store at /nonexistent/store"),
        (["--store", "neo4j://localhost:7687"], "Oxigraph store directory"),
        (["--allow-update"], "--token-file"),
        (["--allow-update", "--token-file", "TOKEN", "--http-processes", "2"], "one writer process"),
    ],
)
def test_cli_refuses_unsafe_or_impossible_settings(family_dir: Path, tmp_path: Path, args: list[str],
                                                   message: str) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    args = [str(token) if a == "TOKEN" else a for a in args]
    full = args if "--store" in args else ["--store", str(family_dir), *args]
    result = CliRunner().invoke(cli, ["serve", *full])
    assert result.exit_code != 0 and message in result.output
