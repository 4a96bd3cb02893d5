"""The W3C SPARQL 1.1 Protocol test suite, replayed against `kgengine serve`.

The manifest (../shared/reference/w3c-sparql11-protocol/manifest.ttl) is read with rdflib;
each case is one or more HTTP requests with the expected status class, result format and
boolean. Every query-side case runs against the default (read-only) server, where update
cases must be refused with 403; then all cases, updates included, run in manifest order
against a server started with --allow-update and a token."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph as ox
import pytest
import rdflib
from rdflib import RDFS, Namespace
from rdflib.collection import Collection
from test_serve_support import W3C, Server, serve

MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
HT = Namespace("http://www.w3.org/2011/http#")
CNT = Namespace("http://www.w3.org/2011/content#")
UT = Namespace("http://www.w3.org/2009/sparql/tests/test-update#")
TOKEN = "w3c-suite-token"

BOOLEAN_TYPES = {"application/sparql-results+json": ox.QueryResultsFormat.JSON,
                 "application/sparql-results+xml": ox.QueryResultsFormat.XML}
TABULAR_TYPES = {**BOOLEAN_TYPES, "text/csv": ox.QueryResultsFormat.CSV,
                 "text/tab-separated-values": ox.QueryResultsFormat.TSV}
RDF_TYPES = {"text/turtle": "turtle", "application/n-triples": "nt", "application/rdf+xml": "xml",
             "application/ld+json": "json-ld"}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: str | None
    statuses: set[int]  # acceptable status classes: 2, 3, 4, 5
    fmt: str | None
    boolean: bool | None


@dataclass
class Case:
    name: str
    requests: list[Request] = field(default_factory=list)

    @property
    def query_side(self) -> bool:
        return "update" not in self.name  # e.g. bad_multiple_queries is query-side too


def load_manifest() -> tuple[list[Case], dict[str, Path]]:
    graph = rdflib.Graph().parse(W3C / "manifest.ttl", format="turtle")
    manifest = next(graph.subjects(MF.entries, None))
    cases = []
    data: dict[str, Path] = {}
    for entry in Collection(graph, graph.value(manifest, MF.entries)):
        case = Case(str(entry).rsplit("#", 1)[1])
        for spec in graph.objects(entry, UT.graphData):
            file_name = str(graph.value(spec, UT.graph)).rsplit("/", 1)[1]
            data[str(graph.value(spec, RDFS.label))] = W3C / file_name
        action = graph.value(entry, MF.action)
        for request in Collection(graph, graph.value(action, HT.requests)):
            headers = {}
            listed = graph.value(request, HT.headers)
            for header in Collection(graph, listed) if listed is not None else []:
                headers[str(graph.value(header, HT.fieldName))] = str(graph.value(header, HT.fieldValue))
            body = graph.value(request, HT.body)
            response = graph.value(request, HT.resp)
            codes = graph.objects(response, MF.expectedStatus)  # hts:StatusCode2xx ...
            statuses = {int(str(code).rsplit("StatusCode", 1)[1][0]) for code in codes}
            boolean = graph.value(response, MF.expectedBoolean)
            fmt = graph.value(response, MF.expectedFormat)
            case.requests.append(Request(
                method=str(graph.value(request, HT.methodName)),
                path="/sparql" + str(graph.value(request, HT.absolutePath)).removeprefix("/sparql/"),
                headers=headers,
                body=str(graph.value(body, CNT.chars)) if body is not None else None,
                statuses=statuses,
                fmt=str(fmt) if fmt is not None else None,
                boolean=boolean.toPython() if boolean is not None else None,
            ))
        cases.append(case)
    return cases, data


def check(request: Request, response: httpx.Response) -> str | None:
    """Why the response fails the expectations, or None when it passes."""
    if response.status_code // 100 not in request.statuses:
        return f"status {response.status_code} (expected {sorted(request.statuses)}xx): {response.text[:200]}"
    media = response.headers.get("content-type", "").split(";")[0].strip()
    if request.fmt in ("boolean", "tabular"):
        types = BOOLEAN_TYPES if request.fmt == "boolean" else TABULAR_TYPES
        if media not in types:
            return f"content type {media!r} is not a {request.fmt} results format"
        result = ox.parse_query_results(response.content, format=types[media])
        if request.boolean is not None and bool(result) is not request.boolean:
            return f"boolean {bool(result)} (expected {request.boolean})"
    elif request.fmt == "RDF":
        if media not in RDF_TYPES:
            return f"content type {media!r} is not an RDF format"
        rdflib.Graph().parse(io.BytesIO(response.content), format=RDF_TYPES[media])
    return None


def replay(server: Server, case: Case, token: str | None = None) -> list[tuple[httpx.Response, Request]]:
    out = []
    with httpx.Client(base_url=server.base, timeout=30) as client:
        for request in case.requests:
            headers = dict(request.headers)
            if token:
                headers["Authorization"] = f"Bearer {token}"
            body = request.body.encode() if request.body is not None else None
            response = client.request(request.method, request.path, headers=headers, content=body)
            out.append((response, request))
    return out


CASES, DATA = load_manifest()


def build_store(directory: Path) -> Path:
    store = ox.Store(str(directory))
    for graph_iri, path in DATA.items():
        store.load(path=str(path), format=ox.RdfFormat.N_TRIPLES, to_graph=ox.NamedNode(graph_iri))
    store.flush()
    del store
    return directory


def test_manifest_is_complete() -> None:
    assert len(CASES) == 34 and sum(c.query_side for c in CASES) == 20
    assert set(DATA) == {f"http://kasei.us/2009/09/sparql/data/data{i}.rdf" for i in (1, 2, 3)}


def test_w3c_protocol_read_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failures: dict[str, str] = {}
    with serve(build_store(tmp_path / "store"), log_dir=tmp_path) as server:
        for case in CASES:
            results = replay(server, case)
            if case.query_side:
                for response, request in results:
                    if (why := check(request, response)) is not None:
                        failures[case.name] = why
            else:  # updates are refused by the read-only server (bad ones: any 4xx)
                first = results[0][0]
                if case.name.startswith("update_") and first.status_code != 403:
                    failures[case.name] = f"update answered {first.status_code}, expected 403"
                elif first.status_code // 100 != 4:
                    failures[case.name] = f"bad update answered {first.status_code}"
        log = server.log_text()
    query_side = [c for c in CASES if c.query_side]
    passed = sum(c.name not in failures for c in query_side)
    with capsys.disabled():
        print(f"\nW3C SPARQL 1.1 Protocol, read-only server: {passed}/{len(query_side)} query-side "
              f"cases pass; {len(CASES) - len(query_side)} update cases refused (403/4xx) as designed")
    assert not failures, json.dumps(failures, indent=2) + "\n" + log[-2000:]


def test_w3c_protocol_with_updates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    failures: dict[str, Any] = {}
    with serve(build_store(tmp_path / "store"), "--allow-update", "--token-file", str(token_file),
               log_dir=tmp_path) as server:
        for case in CASES:  # in manifest order: later cases rely on earlier updates
            for response, request in replay(server, case, TOKEN):
                if (why := check(request, response)) is not None:
                    failures[case.name] = why
        # the token is required: no token or a wrong one is 401, and nothing is changed
        for token in (None, "wrong"):
            headers = {"Content-Type": "application/sparql-update"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            refused = httpx.post(server.url, content="CLEAR ALL", headers=headers, timeout=10)
            assert refused.status_code == 401 and "Bearer" in refused.headers["WWW-Authenticate"]
        still = httpx.get(server.url, params={"query": "ASK { GRAPH ?g { ?s ?p ?o } }"}, timeout=10)
        assert still.json()["boolean"] is True
        log = server.log_text()
    with capsys.disabled():
        print(f"\nW3C SPARQL 1.1 Protocol, --allow-update server: {len(CASES) - len(failures)}/{len(CASES)} "
              "cases pass (query and update)")
    assert not failures, json.dumps(failures, indent=2) + "\n" + log[-2000:]
