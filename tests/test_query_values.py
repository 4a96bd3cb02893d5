"""A big ``VALUES`` block through `kgengine query -f` (issue 22, item 4): the text checks are
linear in the query's length (the IRI scan was quadratic: 63 s for 100,000 IRIs), and give
the same answers as before on the cases they have to tell apart."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.cli import KGENGINE
from kgengine import sparqltext
from kgengine.errors import QueryError, QueryStopped
from kgengine.oxigraph.store import MAX_IRI_CHECKS, OxigraphStore

E, R = "http://kgengine.org/e/", "http://kgengine.org/r/"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    location = tmp_path_factory.mktemp("values") / "store"
    loaded = subprocess.run([KGENGINE, "load", "family", "--store", str(location)], capture_output=True,
                            text=True)
    assert loaded.returncode == 0, loaded.stderr
    return location


def test_a_hundred_thousand_iris_in_values(store: Path, tmp_path: Path) -> None:
    iris = " ".join(f"<{E}{n}>" for n in range(100_000))
    text = f"SELECT ?e ?t WHERE {{ VALUES ?e {{ {iris} }} ?e <{R}wife> ?t }}"
    query_file = tmp_path / "values.rq"
    query_file.write_text(text)
    result = subprocess.run([KGENGINE, "query", "--store", str(store), "--graph", "family", "--format", "tsv",
                             "-f", str(query_file)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    with OxigraphStore(str(store), read_only=True) as reader:
        expected = reader.query(text, "family")
    rows = [tuple(line.split("\t")) for line in result.stdout.splitlines()[1:]]
    assert sorted(rows) == sorted(expected.rows) and len(rows) > 100
    warnings = result.stderr.splitlines()
    # the ids that are not entities are warned on, the first 50 distinct IRIs checked at most
    assert 0 < len(warnings) <= MAX_IRI_CHECKS
    assert all(w.startswith("warning: <http://kgengine.org/e/") for w in warnings)


def test_iri_scan_skips_declarations_strings_and_templates() -> None:
    text = (f'PREFIX x: <{E}> prefix y: <{R}> CONSTRUCT {{ <{E}new> y:made ?o }} WHERE {{ <{R}a> x:b '
            f'"<{E}no> PREFIX z: <{E}q>" . e:c ?p y:o # <{E}comment>\n }}')
    assert sparqltext.kgengine_iris(text, sparqltext.PREFIXES) == [R + "a", E + "b", E + "c", R + "o"]
    assert sparqltext.kgengine_iris(text, sparqltext.PREFIXES, limit=2) == [R + "a", E + "b"]


def test_squeezed_checks_see_the_same_tokens() -> None:
    text = 'PREFIX a: <http://a/>  SELECT * FROM <http://g/> { ?s a:p "SERVICE" . ?s   b:q ?o } # LOAD\n'
    assert sparqltext.keywords(text) == {"FROM"}
    assert sparqltext.undefined_prefixes(text, {}) == ["b"]
    assert sparqltext.update_operation("  PREFIX a: <http://a/>\n\n  INSERT DATA { a:x a:y a:z }") == "INSERT"
    assert sparqltext.update_operation('SELECT * { ?s ?p "INSERT" }') is None


def test_user_query_on_the_writer_and_on_a_reader(store: Path) -> None:
    """``KGStore.user_query`` from the library: on the store object that holds the writer's
    lock (its worker reads a snapshot taken for the query) and on a reading one; a timeout
    stops it (no timing asserted: only that it stops and says so)."""
    ask = f"ASK {{ <{E}7> <{R}wife> ?w }}"
    endless = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f }"
    for read_only in (False, True):
        with OxigraphStore(str(store), read_only=read_only) as opened:
            assert opened.user_query(ask, "family").boolean is True
            warnings: list[str] = []
            result = opened.user_query(f"SELECT ?w WHERE {{ <{E}7> <{R}wife> ?w . <{E}nobody> ?p ?o }}",
                                       "family", warn=warnings.append)
            assert result.rows == () and warnings == [f"<{E}nobody> does not occur in the store"]
            with pytest.raises(QueryStopped, match="query stopped after 0.5 s"):
                opened.user_query(endless, timeout=0.5)
            with pytest.raises(QueryError, match="this is a SPARQL Update"):
                opened.user_query("INSERT DATA { <http://a> <http://b> <http://c> }")
    assert not (store.parent / f".{store.name}.read").exists()
