"""``kgengine serve`` building blocks without a server: result serialisers against
pyoxigraph's own, the row/byte caps, content negotiation, the lexical query checks, and the
store snapshot taken while another process writes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kgengine import sparqltext
from kgengine.oxigraph import snapshots
from kgengine.serve import formats

QRF = ox.QueryResultsFormat
RICH = """SELECT ?a ?b ?c ?d WHERE {
  VALUES (?a ?b) {
    (1 UNDEF)
    ("tab\\tnew\\nline, \\"quoted\\" & <angle>"@en-us--ltr <http://ex.org/a&b?c=1#f>)
    ("plain" "<&>"^^<http://ex.org/dt>)
    (1.5 true)
    ("\\u00e9t\\u00e9 \\U0001F600"@fr -7)
  }
  BIND(<<( <http://ex.org/s> <http://ex.org/p> "o"@fr )>> AS ?d)
}"""


def _solutions(store: ox.Store, query: str) -> tuple[list[str], ox.QuerySolutions]:
    result = store.query(query)
    return [v.value for v in result.variables], result


def _normalise(rows: object) -> list[list[str | None]]:
    return [[None if t is None else str(t) for t in row] for row in rows]  # type: ignore[attr-defined]


RESULT_FORMATS = [("json", QRF.JSON), ("xml", QRF.XML), ("csv", QRF.CSV), ("tsv", QRF.TSV)]


@pytest.mark.parametrize("fmt,rust", RESULT_FORMATS)
def test_exact_serialisers_match_pyoxigraph(fmt: str, rust: ox.QueryResultsFormat) -> None:
    store = ox.Store()
    variables, result = _solutions(store, RICH)
    mine = formats.serialize_solutions(fmt, variables, result, 100, 10**6)
    reference = store.query(RICH).serialize(format=rust)
    assert mine.truncated is None and mine.rows == 5
    if fmt in ("json", "csv", "xml"):
        assert mine.data == reference
    else:  # TSV: pyoxigraph writes a few more literals in bare form; both parse the same
        assert _normalise(ox.parse_query_results(mine.data, format=rust)) == _normalise(
            ox.parse_query_results(reference, format=rust))


def test_boolean_documents_parse() -> None:
    for value in (True, False):
        for fmt, rust in (("json", QRF.JSON), ("xml", QRF.XML)):
            body = formats.serialize_boolean(fmt, value)
            assert bool(ox.parse_query_results(body.data, format=rust)) is value


@pytest.mark.parametrize("fmt", ["json", "xml", "csv", "tsv"])
def test_row_cap_cuts_at_a_row_and_says_so(fmt: str) -> None:
    store = ox.Store()
    query = "SELECT ?n WHERE { VALUES ?n { 1 2 3 4 5 6 7 8 9 10 } }"
    variables, result = _solutions(store, query)
    body = formats.serialize_solutions(fmt, variables, result, 3, 10**6)
    assert body.truncated == "rows" and body.rows == 3
    if fmt in ("json", "xml"):  # still a valid document, with the marker in it
        rust = QRF.JSON if fmt == "json" else QRF.XML
        assert len(list(ox.parse_query_results(body.data, format=rust))) == 3
        assert b"urn:kgengine:truncated:max-rows=3" in body.data
    if fmt == "json":
        assert json.loads(body.data)["head"]["link"] == ["urn:kgengine:truncated:max-rows=3"]
    # the fast path refuses (the worker then re-runs the query through the exact path)
    assert formats.serialize_fast(store.query(query), fmt, 3, 10**6) is None
    assert formats.serialize_fast(store.query(query), fmt, 10, 10**6) is not None


def test_byte_cap_keeps_whole_rows() -> None:
    store = ox.Store()
    query = "SELECT ?n WHERE { VALUES ?n { " + " ".join(f'"{"x" * 50}{i}"' for i in range(100)) + " } }"
    variables, result = _solutions(store, query)
    body = formats.serialize_solutions("json", variables, result, 1000, 1000)
    assert body.truncated == "bytes" and len(body.data) <= 1000
    assert len(json.loads(body.data)["results"]["bindings"]) == body.rows > 0


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12), max_size=25),
    max_rows=st.integers(1, 30),
    max_bytes=st.integers(200, 3000),
    fmt=st.sampled_from(["json", "xml", "csv", "tsv"]),
)
def test_fast_path_agrees_with_exact_path(values: list[str], max_rows: int, max_bytes: int, fmt: str) -> None:
    """Both paths keep to the caps; the Rust fast path accepts a result only when it really
    is within them (its row markers never under-count), and then it holds every row. (The
    two may differ in size: pyoxigraph writes control characters raw where ours escapes.)"""
    store = ox.Store()
    rows = " ".join(str(ox.Literal(v)) for v in values)
    query = f"SELECT ?v WHERE {{ VALUES ?v {{ {rows} }} }}"
    rust = {"json": QRF.JSON, "xml": QRF.XML, "tsv": QRF.TSV}.get(fmt)
    fast = formats.serialize_fast(store.query(query), fmt, max_rows, max_bytes)
    if fast is not None:
        assert len(values) <= max_rows and len(fast.data) <= max_bytes
        if rust is not None:
            assert len(list(ox.parse_query_results(fast.data, format=rust))) == len(values)
    variables, result = _solutions(store, query)
    exact = formats.serialize_solutions(fmt, variables, result, max_rows, max_bytes)
    assert exact.rows <= max_rows and len(exact.data) <= max_bytes
    if rust is not None:
        assert len(list(ox.parse_query_results(exact.data, format=rust))) == exact.rows
    assert (exact.truncated is None) == (exact.rows == len(values))


def test_triples_cap_in_every_rdf_format() -> None:
    store = ox.Store()
    query = ("CONSTRUCT { ?s <http://ex.org/p> ?o } WHERE { "
             "VALUES ?s { <http://ex.org/a> <http://ex.org/b> } VALUES ?o { 1 2 3 4 5 } }")
    for fmt, rdf in formats.RDF_FORMATS.items():
        body = formats.serialize_triples(fmt, store.query(query), 4, 10**6)
        assert body.truncated == "rows"
        assert len(list(ox.parse(body.data, format=rdf))) == 4
        whole = formats.serialize_triples(fmt, store.query(query), 100, 10**6)
        assert whole.truncated is None and len(list(ox.parse(whole.data, format=rdf))) == 10
    small = formats.serialize_triples("turtle", store.query(query), 100, 200)
    assert small.truncated == "bytes" and len(small.data) <= 300  # + the comment line


@pytest.mark.parametrize(
    "accept,expected",
    [
        (None, "json"),
        ("*/*", "json"),
        ("text/csv", "csv"),
        ("text/csv;q=0.5, application/sparql-results+xml", "xml"),
        ("application/sparql-results+json;q=0.1, text/*;q=0.9", "csv"),
        ("text/tab-separated-values, text/csv", "tsv"),  # equal q: the client's order
        ("application/xml;q=0.9, */*;q=0.8", "xml"),
        ("application/json", "json"),
        ("image/png", "json"),  # nothing acceptable: our default rather than 406
        ("text/csv;q=0, */*", "json"),
        ("application/sparql-results+json;q=oops", "json"),
    ],
)
def test_negotiation_for_solutions(accept: str | None, expected: str) -> None:
    assert formats.negotiate(accept, formats.SOLUTION_OFFERS).fmt == expected


def test_negotiation_for_graphs_and_html() -> None:
    assert formats.negotiate(None, formats.GRAPH_OFFERS).fmt == "turtle"
    assert formats.negotiate("application/n-triples", formats.GRAPH_OFFERS).fmt == "ntriples"
    rdfxml_first = "application/rdf+xml;q=0.9, text/turtle;q=0.5"
    assert formats.negotiate(rdfxml_first, formats.GRAPH_OFFERS).fmt == "rdfxml"
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    assert formats.prefers_html(browser)
    assert not formats.prefers_html("*/*") and not formats.prefers_html(None)
    assert not formats.prefers_html("text/turtle, text/html;q=0.5")


@pytest.mark.parametrize(
    "query,found",
    [
        ("SELECT * { SERVICE <http://x/> { ?s ?p ?o } }", {"SERVICE"}),
        ("SELECT * {?s ?p ?o .SERVICE?x{}}", {"SERVICE"}),
        ("select * { service silent <http://x/> {} }", {"SERVICE"}),
        ('SELECT ?service { ?s <http://e/SERVICE> "SERVICE" } # SERVICE', set()),
        ("PREFIX service: <http://e/> SELECT * { service:a ex:SERVICE ?o }", set()),
        ("SELECT * FROM <http://g> { ?s ?p ?o }", {"FROM"}),
        ("SELECT * FROM NAMED <http://g> { GRAPH ?g {} }", {"FROM"}),
        ("SELECT ?from { ?from ?p '''FROM\n''' }", set()),
        ("LOAD <http://x/data.ttl>", {"LOAD"}),
    ],
)
def test_keywords_ignore_strings_iris_comments_and_names(query: str, found: set[str]) -> None:
    assert sparqltext.keywords(query) == found


def test_add_using_targets_each_top_level_where() -> None:
    update = (
        "PREFIX a: <http://e/> INSERT { GRAPH <http://g> { ?s a ?o } } WHERE { ?s ?p ?o "
        "{ SELECT * WHERE { ?s ?p ?o } } } ; DELETE WHERE { ?s ?p ?o } ; "
        'DELETE DATA { <http://a> <http://b> "WHERE" }'
    )
    out = sparqltext.add_using(update, ["http://g1"], ["http://g2"])
    assert out.count("USING <http://g1> USING NAMED <http://g2> WHERE") == 1
    assert "DELETE WHERE { ?s" in out and '"WHERE"' in out
    ox.Store().update(out)  # still valid SPARQL
    assert sparqltext.add_using(update, [], []) == update
    with pytest.raises(sparqltext.DatasetConflict):
        sparqltext.add_using("WITH <http://x> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }", ["http://g"], [])
    with pytest.raises(ValueError):
        sparqltext.add_using("INSERT { ?s ?p ?o } WHERE { ?s ?p ?o }", ["not an iri"], [])


def test_blank_opaque_keeps_offsets() -> None:
    text = 'SELECT ?x { ?x <http://a#b> "str" } # comment\nLIMIT 1'
    masked = sparqltext.blank_opaque(text)
    assert len(masked) == len(text)
    assert re.sub(r"\s+", " ", masked).strip() == "SELECT ?x { ?x } LIMIT 1"


WRITER = """
import sys, time, pyoxigraph as ox
store = ox.Store(sys.argv[1])
g = ox.NamedNode("http://ex.org/g")
store.bulk_extend(ox.Quad(ox.NamedNode(f"http://ex.org/s{i}"), ox.NamedNode("http://ex.org/p"),
                          ox.Literal(i), g) for i in range(5000))
store.flush()
for i in range(300):  # committed, but only in the write-ahead log
    store.add(ox.Quad(ox.NamedNode(f"http://ex.org/w{i}"), ox.NamedNode("http://ex.org/p"), ox.Literal(i), g))
print("ready", flush=True)
sys.stdin.readline()
store.bulk_extend(ox.Quad(ox.NamedNode(f"http://ex.org/t{i}"), ox.NamedNode("http://ex.org/p"),
                          ox.Literal(i), g) for i in range(5000))
store.flush()
store.optimize()  # compaction: the files the snapshot was made from are deleted
print("compacted", flush=True)
sys.stdin.readline()
"""


def test_snapshot_sees_unflushed_writes_and_outlives_compaction(tmp_path: Path) -> None:
    store = tmp_path / "store"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdin is not None
        assert writer.stdout.readline().strip() == "ready"
        snap = snapshots.take_snapshot(store, tmp_path / "snap")
        copy = ox.Store.read_only(str(snap))
        assert len(copy) == 5300  # the WAL-only quads included
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "compacted"
        # every file of the snapshot is still readable (hard links), and nothing new is seen
        assert len(list(copy.quads_for_pattern(None, None, None, None))) == 5300
        assert len(ox.Store.read_only(str(snap))) == 5300
        writer.stdin.write("done\n")
        writer.stdin.flush()
        writer.wait(30)
    finally:
        writer.kill()
