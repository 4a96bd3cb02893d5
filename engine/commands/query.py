"""``kgengine query``: run a read query on the store.

A SPARQL query runs in a worker process (:mod:`kgengine.serve.worker`, the one ``serve``
uses): pyoxigraph evaluates in Rust and never looks at signals, so Ctrl-C and ``--timeout``
are honoured by killing that process. A Cypher query (Neo4j) runs in a thread of this
process, and the same two limits end the command."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import click
import pyoxigraph as ox
from kgengine import sparqltext, terms
from kgengine.cli_common import connect, graph_option, store_option
from kgengine.errors import KGEngineError, QueryError
from kgengine.model import QueryResult
from kgengine.oxigraph_store import OxigraphStore
from kgengine.serve.worker import read_job, write_frame
from kgengine.store import KGStore
from rich.console import Console
from rich.table import Table

T = TypeVar("T")
ROW_FORMATS = ("table", "json", "csv", "tsv")
RDF_FORMATS = {"nt": ("application/n-triples", "N-Triples"), "ttl": ("text/turtle", "Turtle")}
INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
UNLIMITED = 2**62  # the worker's row and byte caps: a local query returns everything
MAX_IRI_CHECKS = 50  # kgengine IRIs of one query looked up in the store (warnings)


class QueryStopped(KGEngineError):
    """The query ran past ``--timeout`` and was stopped."""


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | dict):  # Cypher lists, maps and nodes (as property maps)
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _read_text(text: str | None, query_file: str | None) -> str:
    """The query from the argument, ``-f FILE`` or standard input (``-``)."""
    if (text is None) == (query_file is None):
        raise click.UsageError("give the query as QUERY, or with -f FILE (either may be '-' for stdin)")
    source = query_file if query_file is not None else text
    assert source is not None
    if query_file is None and source != "-":
        return source
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KGEngineError(f"query file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise KGEngineError(f"cannot read query file {path}: {exc.strerror or exc}") from None


@click.command()
@click.argument("text", metavar="[QUERY]", required=False)
@click.option("-f", "--file", "query_file", metavar="FILE",
              help="Read the query from FILE ('-': standard input; QUERY '-' does the same).")
@store_option
@graph_option()
@click.option("--cypher", "cypher", is_flag=True,
              help="QUERY is Cypher (Neo4j stores; $graph is the --graph name) instead of SPARQL.")
@click.option("--format", "fmt", type=click.Choice([*ROW_FORMATS, *RDF_FORMATS]), default="table",
              show_default=True,
              help="tsv: tab-separated values (tab, newline and backslash escaped as \\t \\n \\\\); "
                   "nt / ttl: N-Triples / Turtle, for CONSTRUCT and DESCRIBE.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Stop the query after SECONDS (exit status 1) [default: no limit; Ctrl-C stops it].")
def query(text: str | None, query_file: str | None, store_location: str | None, graph: str | None,
          cypher: bool, fmt: str, timeout: float | None) -> None:
    """Run a read query: SPARQL (SELECT, ASK, CONSTRUCT, DESCRIBE) on an Oxigraph store or,
    with --cypher, read-only Cypher on Neo4j, on GRAPH or on every graph.

    SPARQL queries may use the predeclared prefixes e: (entities), r: (relations), g: (graph
    names), kg:, rdf:, rdfs:, xsd:, and with --graph G also facts: and labels: (G's graph and
    its companion graph of labels and private ids). Ids are percent-encoded in IRIs: the
    FB15k-237 relation /film/film/genre is r:%2Ffilm%2Ffilm%2Fgenre (docs/serve.md)."""
    source = _read_text(text, query_file)
    deadline = None if timeout is None else time.monotonic() + timeout
    store = connect(store_location)
    busy = False  # a Cypher query still running in its thread: closing the driver would wait
    try:
        language = "cypher" if cypher else "sparql"
        if store.query_language != language:
            if cypher:
                raise KGEngineError(f"--cypher needs a store that runs Cypher (Neo4j); the store "
                                    f"{store.location} runs SPARQL")
            raise KGEngineError(
                f"the store {store.location} runs {store.query_language.capitalize()}, not SPARQL: "
                f"pass a Cypher query with --cypher"
            )
        if graph is not None:
            store.require_graph(graph)
        if cypher:
            if fmt in RDF_FORMATS:
                raise KGEngineError(f"--format {fmt} is for SPARQL CONSTRUCT/DESCRIBE, not Cypher")
            try:
                result = _in_thread(lambda: store.query(source, graph), deadline, timeout)
            except (QueryStopped, click.exceptions.Exit):
                busy = True  # exiting closes the connection, and Neo4j then ends the transaction
                raise
            _print_result(result, fmt)
            return
        dataset, prefixes = _dataset(store, graph, source)
        _check_sparql(source, prefixes)
        for warning in _missing_iris(store, source, prefixes):
            click.echo(f"warning: {warning}", err=True)
        location = store.location
    finally:
        if not busy:
            store.close()
    job: dict[str, Any] = {
        "kind": "query", "query": source, "prefixes": prefixes, "allow_service": True,
        "max_rows": UNLIMITED, "max_bytes": UNLIMITED,
        "accept": (f"{RDF_FORMATS[fmt][0]}, application/sparql-results+json" if fmt in RDF_FORMATS
                   else "application/sparql-results+json, application/n-triples"),
    }
    job.update(dataset)
    header, body = _in_worker(location, job, deadline, timeout)
    _print_worker_answer(source, prefixes, header, body, fmt)


def _dataset(store: KGStore, graph: str | None, source: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The query's dataset and predeclared prefixes. With ``--graph G``: G's facts as the
    default graph, G's facts and labels as the named graphs ``facts:`` and ``labels:``.
    Without: the union of every graph as it is now (no half-written staging slot of a
    ``--replace``), unless the query has its own ``FROM``."""
    assert isinstance(store, OxigraphStore)  # the one SPARQL store: where graphs live now
    if graph is not None:
        facts, labels = store.data_graph_iris(graph)
        return ({"default_graphs": [facts], "named_graphs": [facts, labels]},
                sparqltext.graph_prefixes(facts, labels))
    if "FROM" in sparqltext.keywords(source):
        return {}, sparqltext.PREFIXES
    live = store.live_graph_iris()
    return {"default_graphs": live, "named_graphs": live}, sparqltext.PREFIXES


# ---- checks before running ------------------------------------------------------------------
def _check_sparql(source: str, prefixes: dict[str, str]) -> None:
    operation = sparqltext.update_operation(source)
    if operation is not None:
        raise QueryError(
            f"this is a SPARQL Update ({operation}); `kgengine query` runs read queries only "
            "(SELECT, ASK, CONSTRUCT, DESCRIBE). Change data with `kgengine load` / `kgengine drop`, "
            "or send updates to `kgengine serve --allow-update --token-file FILE` (docs/serve.md)"
        )
    missing = sparqltext.undefined_prefixes(source, prefixes)
    if missing:
        known = ", ".join(f"{p}:" for p in sorted(prefixes))
        raise QueryError(f"invalid SPARQL: undefined prefix '{missing[0]}:' — declare it "
                         f"(PREFIX {missing[0]}: <...>) or use a predeclared one ({known})")


def _missing_iris(store: KGStore, source: str, prefixes: dict[str, str]) -> list[str]:
    """Warnings for kgengine IRIs the query names that occur nowhere in the store: most
    often a relation or entity id written without percent-encoding."""
    warnings = []
    for iri in sparqltext.kgengine_iris(source, prefixes)[:MAX_IRI_CHECKS]:
        node = str(ox.NamedNode(iri)) if _valid_iri(iri) else None
        if node is None:
            continue
        if iri.startswith(terms.GRAPH_NS):
            probe = f"ASK {{ GRAPH {node} {{ ?s ?p ?o }} }}"
        else:
            anywhere = f"{{ {node} ?p ?o }} UNION {{ ?s {node} ?o }} UNION {{ ?s ?p {node} }}"
            probe = f"ASK {{ GRAPH ?g {{ {anywhere} }} }}"
        if store.query(probe).boolean:
            continue
        hint = ""
        suggestion = sparqltext.encoded_suggestion(iri)
        if suggestion is not None:
            hint = f"; ids are percent-encoded in IRIs: did you mean {suggestion}?"
        elif iri.startswith(terms.GRAPH_NS):
            hint = "; `kgengine graphs` lists the graphs"
        warnings.append(f"<{iri}> does not occur in the store{hint}")
    return warnings


def _valid_iri(iri: str) -> bool:
    try:
        ox.NamedNode(iri)
    except ValueError:
        return False
    return True


# ---- running under Ctrl-C and --timeout ---------------------------------------------------------
def _interrupted() -> click.exceptions.Exit:
    click.echo("interrupted: query stopped", err=True)
    return click.exceptions.Exit(INTERRUPTED)


def _stopped(timeout: float | None) -> QueryStopped:
    return QueryStopped(f"query stopped after {timeout:g} s (--timeout {timeout:g})")


def _in_worker(location: str, job: dict[str, Any], deadline: float | None,
               timeout: float | None) -> tuple[dict[str, Any], bytes]:
    """Run ``job`` in a fresh worker process on the store; kill it on Ctrl-C or at the
    deadline. The worker is in its own process group, so a terminal's Ctrl-C reaches only
    this process, which stops the worker (no traceback from it)."""
    # --writable: the worker holds the store's lock like every command that opens it, so a
    # load cannot rewrite (and compact away) the files under a long query (docs/serve.md)
    process = subprocess.Popen(
        [sys.executable, "-m", "kgengine.serve.worker", "--store", location, "--writable"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, process_group=0,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def converse() -> tuple[dict[str, Any], bytes]:
        opened = read_job(stdout)
        if opened is None or "error" in opened:
            raise KGEngineError((opened or {}).get("error", "the query worker did not start"))
        write_frame(stdin, job)  # type: ignore[arg-type]
        stdin.close()
        return _read_answer(stdout)

    try:
        return _in_thread(converse, deadline, timeout)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        stdout.close()


def _read_answer(stdout: IO[bytes]) -> tuple[dict[str, Any], bytes]:
    header = read_job(stdout)  # the answer's frame has the job's framing: length + JSON
    if header is None:
        raise KGEngineError("the query worker exited without an answer")
    body = stdout.read(header.get("length", 0))
    return header, body


def _in_thread(work: Callable[[], T], deadline: float | None, timeout: float | None) -> T:
    """``work()`` in a daemon thread while this (main) thread waits, where Ctrl-C and the
    deadline are seen at once (a thread blocked in native code cannot be interrupted)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="kgengine-query", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise _stopped(timeout)
            thread.join(0.1 if left is None else min(0.1, left))
    except KeyboardInterrupt:
        raise _interrupted() from None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# ---- output ---------------------------------------------------------------------------------------
def _print_worker_answer(source: str, prefixes: dict[str, str], header: dict[str, Any], body: bytes,
                         fmt: str) -> None:
    status = header.get("status")
    if status == 400:
        raise QueryError("invalid SPARQL: " + sparqltext.short_syntax_error(
            header.get("error", ""), source, prefixes))
    if status != 200:
        raise KGEngineError(header.get("error", f"the query failed (status {status})"))
    media = header.get("type", "").split(";")[0].strip()
    if fmt in RDF_FORMATS:
        if media != RDF_FORMATS[fmt][0]:
            raise KGEngineError(f"--format {fmt} ({RDF_FORMATS[fmt][1]}) is for CONSTRUCT and DESCRIBE "
                                "queries; this query returns solutions: use table, json, csv or tsv")
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
        return
    if media == "application/n-triples":
        rows = tuple((t.subject.value, t.predicate.value, _term_text(t.object))
                     for t in ox.parse(body, format=ox.RdfFormat.N_TRIPLES))
        _print_result(QueryResult(("subject", "predicate", "object"), rows), fmt)
        return
    document = json.loads(body)
    if "boolean" in document:
        _print_result(QueryResult(boolean=bool(document["boolean"])), fmt)
        return
    columns = sparqltext.star_columns(source, list(document["head"]["vars"]))
    rows = tuple(tuple(_json_cell(binding.get(c)) for c in columns)
                 for binding in document["results"]["bindings"])
    _print_result(QueryResult(tuple(columns), rows), fmt)


def _term_text(term: Any) -> str:
    return term.value if isinstance(term, ox.NamedNode | ox.Literal | ox.BlankNode) else str(term)


def _json_cell(term: dict[str, Any] | None) -> str | None:
    """A SPARQL JSON term's lexical value, as `query` has always printed it."""
    if term is None:
        return None
    if term.get("type") == "triple":  # RDF-star: << s p o >>
        parts = term["value"]
        inner = " ".join(_json_cell(parts[k]) or "" for k in ("subject", "predicate", "object"))
        return f"<< {inner} >>"
    return term.get("value")


def _print_result(result: QueryResult, fmt: str) -> None:
    if result.boolean is not None:
        click.echo(json.dumps({"boolean": result.boolean}) if fmt == "json" else str(result.boolean).lower())
        return
    _print_rows(list(result.columns), [[_cell(v) for v in row] for row in result.rows], fmt)


def _tsv(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _print_rows(columns: list[str], rows: list[list[str]], fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps([dict(zip(columns, row, strict=True)) for row in rows], indent=2,
                              ensure_ascii=False))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    elif fmt == "tsv":
        out = sys.stdout
        out.write("\t".join(map(_tsv, columns)) + "\n")
        for row in rows:
            out.write("\t".join(map(_tsv, row)) + "\n")
    else:
        table = Table(*columns)
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        click.echo(f"{len(rows)} row(s)")
