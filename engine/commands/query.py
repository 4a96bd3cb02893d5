"""``kgengine query``: run a read query on the store.

The store runs it (``KGStore.user_query``) so that Ctrl-C and ``--timeout`` stop it at once:
a SPARQL query in a worker process that is killed (pyoxigraph evaluates in Rust and never
looks at signals), a Cypher query (Neo4j) in a thread whose connection is dropped. The store
is opened read-only: any number of queries run beside each other and beside a writer."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import click
from kgengine.cli_common import connect, graph_option, store_option, warn_incomplete
from kgengine.errors import KGEngineError
from kgengine.model import QueryResult
from rich.console import Console
from rich.table import Table

ROW_FORMATS = ("table", "json", "csv", "tsv")
RDF_FORMATS = ("nt", "ttl")
INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C


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
    store = connect(store_location, read_only=True)
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
        warn_incomplete([store.require_graph(graph)] if graph is not None else store.graphs())
        if cypher and fmt in RDF_FORMATS:
            raise KGEngineError(f"--format {fmt} is for SPARQL CONSTRUCT/DESCRIBE, not Cypher")
        try:
            result = store.user_query(source, graph, timeout=timeout,
                                      rdf_syntax=fmt if fmt in RDF_FORMATS else None,
                                      warn=lambda warning: click.echo(f"warning: {warning}", err=True))
        except KeyboardInterrupt:
            click.echo("interrupted: query stopped", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None
    finally:
        store.close()
    if result.document is not None:
        sys.stdout.buffer.write(result.document)
        sys.stdout.flush()
        return
    _print_result(result, fmt)


# ---- output ---------------------------------------------------------------------------------------
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
