"""``kgengine load / stats / graphs / drop / query``."""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from kgengine.cli_common import connect, graph_option, show_progress, store_option
from kgengine.errors import KGEngineError
from kgengine.loaders import LOADERS, read_dataset
from kgengine.model import QueryResult
from kgengine.progress import PhaseLog, progress_bar
from rich.console import Console
from rich.table import Table


def _parse_options(pairs: tuple[str, ...]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--option")
        options[key.strip()] = value.strip()
    return options


@click.command()
@click.argument("dataset", type=click.Choice(sorted(LOADERS), case_sensitive=False))
@click.option("--path", type=click.Path(exists=True, path_type=Path), default=None,
              help="Dataset directory or file [default: the bundled copy for family, "
                   "else $KGENGINE_DATA/DATASET].")
@store_option
@graph_option()
@click.option("--splits", default=None,
              help="Comma-separated splits to put in the KG [default: all splits].")
@click.option("--replace", is_flag=True, help="Replace an existing graph of that name.")
@click.option("--seed", default=0, show_default=True, help="Seed of the private-id mapping.")
@click.option("--option", "-o", "options", multiple=True, metavar="KEY=VALUE",
              help="Reader option, e.g. labels=false (fb15k-237, wikidata5m), strip_of=false "
                   "(brink), literals=entities (rdf), separator=pipe (tsv). Repeatable.")
def load(dataset: str, path: Path | None, store_location: str | None, graph: str | None,
         splits: str | None, replace: bool, seed: int, options: tuple[str, ...]) -> None:
    """Load DATASET into the store as a named graph (default name: the dataset's).

    A malformed line stops the load with its file, line number and text, and the store
    keeps what it had (no half-loaded graph)."""
    split_list = [s.strip() for s in splits.split(",") if s.strip()] if splits else None
    data = read_dataset(dataset.lower(), path, split_list, **_parse_options(options))
    name = graph or data.graph_name or data.name
    started = time.perf_counter()
    store = connect(store_location, create=True)
    try:
        interactive = show_progress()
        with progress_bar(f"loading {name}", enabled=interactive) as bar:
            info = store.load(
                name, data.triples, dataset=data.name, labels=data.labels,
                relation_labels=data.relation_labels, source=data.source,
                splits=data.splits, replace=replace, seed=seed,
                progress=bar if interactive else PhaseLog(),
            )
    finally:
        store.close()
    seconds = time.perf_counter() - started
    click.echo(f"loaded graph {info.name!r}: {info.triples:,} triples "
               f"from {data.source or dataset} in {seconds:.1f} s")
    for warning in getattr(data.triples, "warnings", list)():
        click.echo(f"warning: {warning}", err=True)


@click.command()
@store_option
def graphs(store_location: str | None) -> None:
    """List the graphs in the store."""
    store = connect(store_location, read_only=False)
    try:
        infos = store.graphs()
    finally:
        store.close()
    table = Table("graph", "dataset", "triples", "status", "splits", "loaded at")
    for info in infos:
        table.add_row(info.name, info.dataset, f"{info.triples:,}", info.status,
                      ",".join(info.splits), info.loaded_at)
    Console().print(table)


@click.command()
@store_option
@graph_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def stats(store_location: str | None, graph: str | None, as_json: bool) -> None:
    """Counts and degree statistics of one graph (or of every graph)."""
    store = connect(store_location)
    try:
        names = [graph] if graph else [g.name for g in store.graphs()]
        if not names:
            raise KGEngineError(f"the store {store.location} has no graphs; run `kgengine load`")
        results = {name: store.stats(name) for name in names}
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({
            name: {"triples": s.triples, "entities": s.entities, "relations": s.relations,
                   "per_relation": s.per_relation, "degree": s.degree_summary(),
                   "degree_histogram": {str(k): v for k, v in s.degree_histogram.items()}}
            for name, s in results.items()
        }, indent=2))
        return
    console = Console()
    for name, s in results.items():
        summary = s.degree_summary()
        console.print(f"[bold]{name}[/bold]: {s.triples:,} triples, {s.entities:,} entities, "
                      f"{s.relations:,} relations; degree mean {summary['mean']:.2f}, "
                      f"median {summary['median']:.0f}, max {summary['max']:.0f}")
        table = Table("relation", "triples")
        for relation, n in sorted(s.per_relation.items(), key=lambda kv: -kv[1]):
            table.add_row(relation, f"{n:,}")
        console.print(table)


@click.command()
@click.argument("graph_name", metavar="GRAPH")
@store_option
@click.confirmation_option(prompt="Drop this graph?")
def drop(graph_name: str, store_location: str | None) -> None:
    """Remove GRAPH (its triples, labels and metadata) from the store."""
    store = connect(store_location)
    try:
        store.drop(graph_name)
    finally:
        store.close()
    click.echo(f"dropped graph {graph_name!r}")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | dict):  # Cypher lists, maps and nodes (as property maps)
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


@click.command()
@click.argument("text", metavar="QUERY")
@store_option
@graph_option()
@click.option("--cypher", "cypher", is_flag=True,
              help="QUERY is Cypher (Neo4j stores; $graph is the --graph name) instead of SPARQL.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True)
def query(text: str, store_location: str | None, graph: str | None, cypher: bool, fmt: str) -> None:
    """Run a SPARQL query (Oxigraph) or, with --cypher, a read-only Cypher query (Neo4j) on
    GRAPH or on every graph."""
    store = connect(store_location)
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
        result = store.query(text, graph)
    finally:
        store.close()
    _print_result(result, fmt)


def _print_result(result: QueryResult, fmt: str) -> None:
    if result.boolean is not None:
        click.echo(json.dumps({"boolean": result.boolean}) if fmt == "json" else str(result.boolean).lower())
        return
    _print_rows(list(result.columns), [[_cell(v) for v in row] for row in result.rows], fmt)


def _print_rows(columns: list[str], rows: list[list[str]], fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps([dict(zip(columns, row, strict=True)) for row in rows], indent=2,
                              ensure_ascii=False))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        table = Table(*columns)
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        click.echo(f"{len(rows)} row(s)")
