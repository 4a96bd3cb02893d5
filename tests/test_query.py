"""`kgengine query` as a user meets it: stopping a runaway query (Ctrl-C, --timeout) on a
real store in a real process, the projection's column order, the output formats, reading
the query from a file or stdin, messages that point the right way, predeclared prefixes and
the warning for a kgengine IRI that is not in the store."""

from __future__ import annotations

import csv
import io
import json
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import psutil
import pyoxigraph as ox
import pytest
from click.testing import CliRunner
from helpers.cli import KGENGINE
from kgengine import terms
from kgengine.cli import main as cli

FAMILY_FACTS = Path(__file__).resolve().parents[1] / "engine" / "data" / "family" / "facts.txt"
# every pair of triples of every pair of triples: 17,615^3 rows to count, hours of work
RUNAWAY = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f }"
GENRE = "/film/film/genre"


@pytest.fixture(scope="module")
def film_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FB15k-237-style relation paths (with '/'), loaded through the CLI."""
    folder = tmp_path_factory.mktemp("film")
    kg = folder / "kg.tsv"
    kg.write_text(f"/m/01\t{GENRE}\t/m/02\n/m/03\t{GENRE}\t/m/02\n/m/01\t/film/film/country\t/m/04\n")
    store = folder / "store"
    result = CliRunner().invoke(cli, ["load", "tsv", "--path", str(kg), "--store", str(store),
                                      "--graph", "film"])
    assert result.exit_code == 0, result.output
    return store


def query(store: Path, *args: str, input: str | None = None):  # noqa: A002 (click's name)
    return CliRunner().invoke(cli, ["query", "--store", str(store), *args], input=input)


def raw_facts(relation: str) -> list[tuple[str, str]]:
    pairs = []
    for line in FAMILY_FACTS.read_text().splitlines():
        head, rel, tail = line.split("\t")
        if rel == relation:
            pairs.append((head, tail))
    return pairs


# ---- stopping a runaway query (item 3) ----------------------------------------------------------
def _start(store: Path, *args: str) -> subprocess.Popen[str]:
    # a shell starts background commands with SIGINT ignored; a terminal's command has it
    return subprocess.Popen([KGENGINE, "query", "--store", str(store), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _busy_worker(process: subprocess.Popen[str]) -> psutil.Process:
    """The query's worker process, once it is evaluating (burning CPU)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = psutil.Process(process.pid).children()
        if children and children[0].cpu_times().user > 0.5:
            return children[0]
        time.sleep(0.1)
    raise AssertionError("the query never started evaluating")


def test_ctrl_c_stops_a_runaway_query_within_a_second(family_dir: Path) -> None:
    process = _start(family_dir, RUNAWAY)
    worker = _busy_worker(process)
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=10)
    elapsed = time.monotonic() - sent
    assert code == 130, process.stderr.read() if process.stderr else ""
    assert elapsed < 1.0
    assert "interrupted" in (process.stderr.read() if process.stderr else "")
    worker.wait(timeout=5)  # the evaluating process is gone too, not left burning a core
    assert not worker.is_running()


def test_timeout_stops_a_runaway_query_with_a_clear_message(family_dir: Path) -> None:
    started = time.monotonic()
    out = subprocess.run([KGENGINE, "query", "--store", str(family_dir), "--timeout", "1.5", RUNAWAY],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == "Error: query stopped after 1.5 s (--timeout 1.5)"
    assert time.monotonic() - started < 10  # stopped, not run to the end (hours)
    assert out.stdout == ""


def test_a_query_within_its_timeout_answers(family_dir: Path) -> None:
    result = query(family_dir, "--timeout", "60", "--format", "json",
                   "SELECT (COUNT(*) AS ?n) WHERE { GRAPH g:family-facts { ?h r:aunt ?t } }")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [{"n": str(len(raw_facts("aunt")))}]


# ---- output (item 7) ----------------------------------------------------------------------------
def test_select_star_keeps_the_order_of_the_query(family_dir: Path) -> None:
    result = query(family_dir, "--format", "csv", "SELECT * WHERE { ?s ?p ?o } LIMIT 2")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "s,p,o"  # pyoxigraph alone gives o,p,s
    result = query(family_dir, "--format", "csv",
                   "SELECT * WHERE { ?zeta r:aunt ?alpha . BIND(1 AS ?middle) } LIMIT 1")
    assert result.output.splitlines()[0] == "zeta,alpha,middle"
    result = query(family_dir, "--format", "csv", "SELECT ?o ?s WHERE { ?s r:aunt ?o } LIMIT 1")
    assert result.output.splitlines()[0] == "o,s"


def test_tsv_has_the_rows_of_csv(family_dir: Path) -> None:
    text = "SELECT ?h ?t WHERE { GRAPH g:family-facts { ?h r:aunt ?t } } ORDER BY ?h ?t"
    tsv = query(family_dir, "--format", "tsv", text)
    assert tsv.exit_code == 0, tsv.output
    rows = [line.split("\t") for line in tsv.output.splitlines()]
    assert rows[0] == ["h", "t"]
    assert rows[1:] == list(csv.reader(io.StringIO(query(family_dir, "--format", "csv", text).output)))[1:]
    expected = Counter((terms.entity_iri(h), terms.entity_iri(t)) for h, t in raw_facts("aunt"))
    assert Counter(map(tuple, rows[1:])) == expected


def test_tsv_escapes_tabs_and_newlines(family_dir: Path) -> None:
    result = query(family_dir, "--format", "tsv",
                   'SELECT ?x ?y WHERE { BIND("a\\tb\\nc" AS ?x) BIND("d" AS ?y) }')
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["x\ty", "a\\tb\\nc\td"]


@pytest.mark.parametrize("fmt,rdf_format", [("nt", ox.RdfFormat.N_TRIPLES), ("ttl", ox.RdfFormat.TURTLE)])
def test_construct_as_rdf(family_dir: Path, fmt: str, rdf_format: ox.RdfFormat) -> None:
    text = "CONSTRUCT { ?t r:has_aunt ?h } WHERE { GRAPH g:family-facts { ?h r:aunt ?t } }"
    result = query(family_dir, "--format", fmt, text)
    assert result.exit_code == 0, result.output
    assert not result.stderr  # no warning for the template's new relation
    triples = {(t.subject.value, t.predicate.value, t.object.value)
               for t in ox.parse(result.stdout.encode(), format=rdf_format)}
    expected = {(terms.entity_iri(t), terms.relation_iri("has_aunt"), terms.entity_iri(h))
                for h, t in raw_facts("aunt")}
    assert triples == expected


def test_rdf_formats_refuse_a_select(family_dir: Path) -> None:
    result = query(family_dir, "--format", "nt", "SELECT * WHERE { ?s ?p ?o } LIMIT 1")
    assert result.exit_code == 1 and "is for CONSTRUCT and DESCRIBE" in result.output


def test_query_from_a_file_and_from_stdin(family_dir: Path, tmp_path: Path) -> None:
    text = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH g:family-facts { ?h r:uncle ?t } }"
    expected = [{"n": str(len(raw_facts("uncle")))}]
    file = tmp_path / "count.rq"
    file.write_text(text)
    assert json.loads(query(family_dir, "-f", str(file), "--format", "json").output) == expected
    assert json.loads(query(family_dir, "-", "--format", "json", input=text).output) == expected
    assert json.loads(query(family_dir, "-f", "-", "--format", "json", input=text).output) == expected
    missing = query(family_dir, "-f", str(tmp_path / "nope.rq"))
    assert missing.exit_code == 1 and f"cannot read query file {tmp_path / 'nope.rq'}" in missing.output
    both = query(family_dir, "-f", str(file), text)
    assert both.exit_code == 2 and "either" in both.output


# ---- messages (item 6) ------------------------------------------------------------------------------
def test_an_update_is_told_how_updates_are_done(family_dir: Path) -> None:
    result = query(family_dir, "PREFIX x: <http://x/>\nINSERT DATA { e:1 r:brother e:2 }")
    assert result.exit_code == 1
    assert "SPARQL Update (INSERT)" in result.output and "read queries" in result.output
    assert "kgengine serve --allow-update" in result.output and "expected CONSTRUCT" not in result.output
    asked = query(family_dir, "--format", "json", "ASK { e:1 r:brother e:2 }")
    assert not json.loads(asked.output)["boolean"]


def test_an_undefined_prefix_is_one_line_with_a_hint(family_dir: Path) -> None:
    result = query(family_dir, "SELECT * WHERE { ?s foaf:knows ?o }")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == ["Error: invalid SPARQL: undefined prefix 'foaf:' — declare it (PREFIX foaf: <...>) "
                     "or use a predeclared one (e:, g:, kg:, r:, rdf:, rdfs:, xsd:)"]


def test_a_long_parser_message_is_cut_to_its_place(family_dir: Path) -> None:
    result = query(family_dir, "SELECT * WHERE { ?s ?p ?o . FILTER(?o > ) }")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: invalid SPARQL: error at 1:")
    assert len(lines[0]) < 200


@pytest.mark.parametrize("command", [["query", "--cypher", "RETURN 1"], ["graphs"],
                                     ["stats", "--graph", "g"]])
def test_a_neo4j_uri_with_nothing_listening_prints_one_message(command: list[str]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = subprocess.run([KGENGINE, *command, "--store", f"neo4j://127.0.0.1:{port}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: cannot reach Neo4j at neo4j://127.0.0.1:{port}")


# ---- writing queries by hand (item 8) ----------------------------------------------------------------
def test_predeclared_prefixes_and_the_labels_graph(family_dir: Path) -> None:
    facts = {h for h, _ in raw_facts("brother")}
    result = query(family_dir, "--graph", "family-facts", "--format", "json",
                   "SELECT DISTINCT ?s ?id WHERE { ?s r:brother ?o . GRAPH labels: { ?s kg:privateId ?id } }")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {terms.decode_iri(r["s"]) for r in rows} == facts
    assert all(r["id"] for r in rows) and len({r["id"] for r in rows}) == len(rows)


def test_graph_queries_count_facts_only(family_dir: Path) -> None:
    result = query(family_dir, "--graph", "family-facts", "--format", "json",
                   "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert json.loads(result.output) == [{"n": str(len(FAMILY_FACTS.read_text().splitlines()))}]


def test_an_unencoded_relation_warns_with_the_encoded_form(film_store: Path) -> None:
    wrong = query(film_store, "--format", "json", f"SELECT ?s WHERE {{ ?s <{terms.RELATION_NS}{GENRE}> ?o }}")
    assert wrong.exit_code == 0
    assert json.loads(wrong.stdout) == []
    assert f"warning: <{terms.RELATION_NS}{GENRE}> does not occur in the store; ids are percent-encoded " \
           "in IRIs: did you mean r:%2Ffilm%2Ffilm%2Fgenre?" in wrong.stderr
    expected = [terms.entity_iri("/m/01"), terms.entity_iri("/m/03")]
    right = query(film_store, "--format", "json",
                  "SELECT ?s WHERE { ?s r:%2Ffilm%2Ffilm%2Fgenre e:%2Fm%2F02 }")
    assert right.exit_code == 0 and not right.stderr
    assert sorted(r["s"] for r in json.loads(right.stdout)) == expected
    helper = query(film_store, "--format", "json",
                   'SELECT ?s WHERE { BIND(IRI(CONCAT(STR(r:), ENCODE_FOR_URI("/film/film/genre"))) AS ?rel) '
                   "?s ?rel ?o }")
    assert sorted(r["s"] for r in json.loads(helper.stdout)) == expected


def test_a_missing_graph_name_warns(family_dir: Path) -> None:
    result = query(family_dir, "ASK { GRAPH g:famly { ?s ?p ?o } }")
    assert result.exit_code == 0 and result.stdout.strip() == "false"
    assert f"warning: <{terms.graph_iri('famly')}> does not occur in the store" in result.stderr


def test_graph_queries_follow_a_replaced_graph(tmp_path: Path) -> None:
    """After `load --replace` the graph lives in its other named-graph slot: --graph, facts:
    and labels: still find it, and the union has no copy of the old data."""
    store = tmp_path / "store"
    kg = tmp_path / "kg.tsv"
    for rows in ("a\tr\tb\n", "a\tr\tb\nb\tr\tc\n"):
        kg.write_text(rows)
        loaded = CliRunner().invoke(cli, ["load", "tsv", "--path", str(kg), "--store", str(store),
                                          "--graph", "tiny", "--replace"])
        assert loaded.exit_code == 0, loaded.output
    count = query(store, "--graph", "tiny", "--format", "json", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert json.loads(count.stdout) == [{"n": "2"}]
    ids = query(store, "--graph", "tiny", "--format", "json",
                "SELECT (COUNT(*) AS ?n) WHERE { GRAPH labels: { ?e kg:privateId ?id } }")
    assert json.loads(ids.stdout) == [{"n": "3"}]
    union = query(store, "--format", "json", "SELECT (COUNT(*) AS ?n) WHERE { ?s r:r ?o }")
    assert json.loads(union.stdout) == [{"n": "2"}]
