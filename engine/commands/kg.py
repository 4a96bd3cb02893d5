"""``kgengine load / stats / graphs / drop`` (``query`` lives in commands/query.py)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import click
from kgengine.cli_common import connect, graph_option, show_progress, store_option
from kgengine.errors import InvalidParameterError, KGEngineError
from kgengine.loaders import LOADERS, read_dataset
from kgengine.progress import PhaseLog, Reporter, progress_bar
from rich.console import Console
from rich.table import Table

# below this many columns a table's cells would have to be cut: print plain columns instead
NARROW_TERMINAL = 60


def check_graph_option(graph: str | None) -> None:
    """``--graph ''`` is a mistake (an unset variable), not a request for the default name."""
    if graph is not None and not graph.strip():
        raise InvalidParameterError("--graph must not be empty (leave it out for the default)")


def plain_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, nothing cut (for pipes and narrow terminals)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in (header, *rows)]
    return "\n".join(lines) + "\n"


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()) -> None:
    """A rich table on a terminal wide enough for it, cells wrapped rather than cut; plain
    columns when the output is piped or the terminal narrow. Identifiers are never cut."""
    width = shutil.get_terminal_size((80, 24)).columns
    if not stdout_is_terminal() or width < NARROW_TERMINAL:
        click.echo(plain_table(header, rows), nl=False)
        return
    table = Table()
    for name in header:
        table.add_column(name, overflow="fold", justify="right" if name in right else "left")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def _progress_for(interactive: bool, bar: Reporter) -> Reporter:
    return bar if interactive else PhaseLog()


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
@click.option("--replace", is_flag=True,
              help="Replace an existing graph of that name (the old one stays until the new one "
                   "is complete).")
@click.option("--allow-empty", is_flag=True, help="Load input that holds no triples as an empty graph.")
@click.option("--seed", default=0, show_default=True, help="Seed of the private-id mapping.")
@click.option("--option", "-o", "options", multiple=True, metavar="KEY=VALUE",
              help="Reader option, e.g. labels=false (fb15k-237, wikidata5m), strip_of=false "
                   "(brink), literals=entities (rdf), separator=pipe (tsv). Repeatable.")
def load(dataset: str, path: Path | None, store_location: str | None, graph: str | None,
         splits: str | None, replace: bool, allow_empty: bool, seed: int, options: tuple[str, ...]) -> None:
    """Load DATASET into the store as a named graph (default name: the dataset's).

    A malformed line stops the load with its file, line number and text, and the store
    keeps what it had (no half-loaded graph)."""
    check_graph_option(graph)
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
                splits=data.splits, replace=replace, seed=seed, allow_empty=allow_empty,
                progress=_progress_for(interactive, bar),
            )
        from kgengine.mining.index import write_after_load

        write_after_load(store, info.name)  # the mining index, so that `mine` need not scan the store
    finally:
        store.close()
    seconds = time.perf_counter() - started
    click.echo(f"loaded graph {info.name!r}: {info.triples:,} triples "
               f"from {data.source or dataset} in {seconds:.1f} s")
    for warning in getattr(data.triples, "warnings", list)():
        click.echo(f"warning: {warning}", err=True)


@click.command()
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def graphs(store_location: str | None, as_json: bool) -> None:
    """List the graphs in the store."""
    store = connect(store_location, read_only=True)
    try:
        infos = store.graphs()
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({
            info.name: {"dataset": info.dataset, "triples": info.triples, "status": info.status,
                        "source": info.source, "splits": list(info.splits), "loaded_at": info.loaded_at}
            for info in infos
        }, indent=2))
        return
    print_table(("graph", "dataset", "triples", "status", "splits", "loaded at"),
                [(i.name, i.dataset, f"{i.triples:,}", i.status, ",".join(i.splits), i.loaded_at)
                 for i in infos], right=("triples",))


@click.command()
@store_option
@graph_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
def stats(store_location: str | None, graph: str | None, as_json: bool) -> None:
    """Counts and degree statistics of one graph (or of every graph)."""
    check_graph_option(graph)
    store = connect(store_location, read_only=True)
    try:
        infos = [store.require_graph(graph)] if graph is not None else store.graphs()
        if not infos:
            raise KGEngineError(f"the store {store.location} has no graphs; run `kgengine load`")
        results = {info.name: store.stats(info.name) for info in infos}
    finally:
        store.close()
    incomplete = [info.name for info in infos if info.status != "complete"]
    for name in incomplete:
        click.echo(f"warning: graph {name!r} is incomplete (its load was interrupted): its counts are "
                   f"those of a partial graph; reload it with `kgengine load … --graph {name}`", err=True)
    if as_json:
        click.echo(json.dumps({
            name: {"complete": name not in incomplete,
                   "triples": s.triples, "entities": s.entities, "relations": s.relations,
                   "per_relation": s.per_relation, "degree": s.degree_summary(),
                   "degree_histogram": {str(k): v for k, v in s.degree_histogram.items()}}
            for name, s in results.items()
        }, indent=2))
        return
    for name, s in results.items():
        summary = s.degree_summary()
        state = " (INCOMPLETE: interrupted load)" if name in incomplete else ""
        click.echo(f"{name}{state}: {s.triples:,} triples, {s.entities:,} entities, "
                   f"{s.relations:,} relations; degree mean {summary['mean']:.2f}, "
                   f"median {summary['median']:.0f}, max {summary['max']:.0f}")
        by_size = sorted(s.per_relation.items(), key=lambda kv: -kv[1])
        print_table(("relation", "triples"), [(relation, f"{n:,}") for relation, n in by_size],
                    right=("triples",))


@click.command()
@click.argument("graph_name", metavar="GRAPH")
@store_option
@click.confirmation_option(prompt="Drop this graph?")
def drop(graph_name: str, store_location: str | None) -> None:
    """Remove GRAPH (its triples, labels and metadata) from the store."""
    store = connect(store_location)
    try:
        interactive = show_progress()
        with progress_bar(f"dropping {graph_name}", enabled=interactive) as bar:
            store.drop(graph_name, progress=_progress_for(interactive, bar))
    finally:
        store.close()
    click.echo(f"dropped graph {graph_name!r}")
