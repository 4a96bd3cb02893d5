"""``kgengine entity SEARCH``: find entities by id, private id or label (the search that
``kgengine ask`` links question mentions with); ``kgengine neighbours ENTITY``: its k-hop
subgraph; ``kgengine export GRAPH``: a graph written out as TSV, N-Triples or N-Quads."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import click
from kgengine.cli_common import (
    check_output_file,
    connect,
    graph_option,
    show_progress,
    store_option,
    warn_incomplete,
)
from kgengine.commands.kg import plain_table
from kgengine.errors import KGEngineError
from kgengine.fsutil import atomic_write
from kgengine.model import Direction, Entity, Triple
from kgengine.progress import PhaseLog, Reporter, progress_bar
from kgengine.rag.linking.entities import EntityMatch, GraphEntityLinker, search_entities
from kgengine.store import resolve_graph
from kgengine.terms import RDFS_LABEL, entities_graph_iri, entity_iri, graph_iri, relation_iri
from rich.console import Console
from rich.table import Table


@click.command()
@click.argument("search")
@graph_option(required=True)
@store_option
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def entity(search: str, graph: str, store_location: str | None, limit: int, as_json: bool) -> None:
    """Entities of GRAPH named SEARCH: by id (exact), private id (case-insensitive), label
    (exact, case-insensitive, prefix); fuzzy suggestions when nothing matches. Prints id,
    private id, label and degree."""
    store = connect(store_location, read_only=True)
    try:
        warn_incomplete([store.require_graph(graph)])
        matches = search_entities(store, graph, search, limit=limit)
        suggestions: list[EntityMatch] = []
        if not matches:
            suggestions = _fuzzy(store, graph, search, limit)
        if suggestions:  # the private ids and labels of the close names, from the store
            ids = [Entity(m.id) for m in suggestions]
            rows = {r["e"]: r for r in store.run("entity_lookup", graph, e=ids)}
            suggestions = [EntityMatch(m.id, rows[m.id]["label"], rows[m.id]["private"], m.match)
                           for m in suggestions if m.id in rows]
        shown = matches or suggestions
        degrees = {row["e"]: row["degree"] for row in store.run(
            "entity_degrees", graph, e=[Entity(m.id) for m in shown])} if shown else {}
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps({"search": search, "graph": graph, "suggestions": not matches,
                               "entities": [m.to_json() | {"degree": degrees.get(m.id, 0)} for m in shown]},
                              ensure_ascii=False, indent=1))
        return
    if not shown:
        raise KGEngineError(f"no entity of graph {graph!r} matches {search!r}, nor anything close")
    title = f"entities matching {search!r}" if matches else f"no match for {search!r}; close names"
    table = Table("id", "private id", "label", "degree", "match", title=title)
    for m in shown:
        table.add_row(m.id, m.private_id or "", m.label or "", str(degrees.get(m.id, 0)), m.match)
    Console().print(table)


def _fuzzy(store: object, graph: str, search: str, limit: int) -> list[EntityMatch]:
    linker = GraphEntityLinker(store, graph)  # type: ignore[arg-type]
    surfaces = linker._surfaces  # noqa: SLF001 - the linker's in-memory index of names
    out: dict[str, EntityMatch] = {}
    for key in difflib.get_close_matches(search.casefold(), list(surfaces), n=limit, cutoff=0.6):
        for entity_id, kind, _ in surfaces[key]:
            if entity_id not in out:
                labels = [w for e, k, w in surfaces.get(key, []) if e == entity_id and k == "label"]
                out[entity_id] = EntityMatch(entity_id, labels[0] if labels else None, None,
                                             f"close {kind}")
    return list(out.values())[:limit]


# ---------------------------------------------------------------- kgengine neighbours


@click.command()
@click.argument("entity_name", metavar="ENTITY")
@graph_option()
@store_option
@click.option("--hops", type=click.IntRange(1, 3), default=1, show_default=True)
@click.option("--relation", default=None,
              help="Keep only the triples of this relation (a filter on the walked subgraph: the walk "
                   "itself follows every relation).")
@click.option("--direction", type=click.Choice([d.value for d in Direction]), default="both",
              show_default=True, help="Follow edges out of, into, or both ways from each entity.")
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True,
              help="At most this many triples are printed (the total is said when more exist).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of [head, relation, tail].")
def neighbours(entity_name: str, graph: str | None, store_location: str | None, hops: int,
               relation: str | None, direction: str, limit: int, as_json: bool) -> None:
    """The HOPS-hop subgraph around ENTITY (an id, private id or label, resolved like
    ``kgengine entity``; an unknown name fails with close matches), as head, relation, tail."""
    store = connect(store_location, read_only=True)
    try:
        graph_name = resolve_graph(store, graph)
        seed = GraphEntityLinker(store, graph_name).resolve(entity_name).id
        # The walk goes on past --limit up to COUNT_CAP triples so that a cut output can say
        # how many there are; with a relation filter the whole walk is filtered first, so that
        # the limit counts kept triples.
        cap = None if relation else max(limit, COUNT_CAP) + 1
        walked = store.neighbourhood(graph_name, seed, hops=hops, direction=Direction(direction), limit=cap)
    finally:
        store.close()
    every = neighbour_triples(walked, relation)
    total = None if cap is not None and len(walked) >= cap else len(every)  # None: more than COUNT_CAP
    kept = every[:limit]
    if as_json:
        click.echo(json.dumps([list(t) for t in kept], ensure_ascii=False))
    else:
        click.echo(plain_table(("head", "relation", "tail"), kept), nl=False)
    if len(kept) == total:
        click.echo(f"{total:,} triples within {hops} hop(s) of {seed}", err=True)
    elif total is not None:
        click.echo(f"{len(kept):,} of {total:,} triples within {hops} hop(s) of {seed} "
                   f"(cut at --limit {limit}; --limit {total} shows all)", err=True)
    else:
        click.echo(f"{len(kept):,} of more than {COUNT_CAP:,} triples within {hops} hop(s) of {seed} "
                   f"(cut at --limit {limit}; raise it to see more)", err=True)


COUNT_CAP = 100_000  # triples a cut neighbourhood walk counts at most for its total


def neighbour_triples(triples: Iterable[Triple], relation: str | None) -> list[Triple]:
    """The distinct triples of ``relation`` (all when None), sorted."""
    return sorted({t for t in triples if relation is None or t.relation == relation})


# ---------------------------------------------------------------- kgengine export

EXPORT_FORMATS = ("tsv", "nt", "nq")


@click.command()
@click.argument("graph_name", metavar="GRAPH")
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), default="tsv", show_default=True)
@click.option("--output", "-o", type=click.Path(path_type=Path), required=True, help="File to write.")
@store_option
def export(graph_name: str, fmt: str, output: Path, store_location: str | None) -> None:
    """Write GRAPH out: tsv = sorted ``head<TAB>relation<TAB>tail`` lines of dataset ids
    (reloads with ``kgengine load tsv``); nt / nq = RDF in kgengine's IRIs, facts plus the
    entities' and relations' rdfs:labels (nq: facts in the graph's named graph, labels in its
    companion ``…/entities`` graph). Private ids are not written. The file appears only when
    complete (written to a temporary file, then renamed)."""
    check_output_file(output, "--output")
    store = connect(store_location, read_only=True)
    try:
        name = resolve_graph(store, graph_name)
        total = store.require_graph(name).triples
        interactive = show_progress()
        with progress_bar(f"exporting {name}", total=total, enabled=interactive) as bar:
            progress: Reporter = bar if interactive else PhaseLog()
            progress.start(f"exporting {name} ({total} triples) to {output}", total=total)
            facts: Iterable[Triple] = _counted(store.triples(name), progress)
            if fmt == "tsv":
                lines: Iterable[str] = tsv_lines(sorted(facts))
            else:
                labels = store.labels(name)
                relation_labels = store.relation_labels(name)
                lines = rdf_lines(facts, labels, relation_labels, name, quads=fmt == "nq")
            written = _write_atomically(output, lines)
    finally:
        store.close()
    click.echo(f"wrote {written} lines of {name} to {output} ({fmt})", err=True)


def _counted(triples: Iterable[Triple], progress: Reporter) -> Iterator[Triple]:
    for n, triple in enumerate(triples, 1):
        if n % 10_000 == 0:
            progress.advance(10_000)
        yield triple


def tsv_lines(triples: Iterable[Triple]) -> Iterator[str]:
    for head, relation, tail in triples:
        yield f"{head}\t{relation}\t{tail}\n"


def _literal(text: str) -> str:
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r"))
    return f'"{escaped}"'


def rdf_lines(triples: Iterable[Triple], labels: dict[str, str], relation_labels: dict[str, str],
              graph: str, *, quads: bool) -> Iterator[str]:
    """N-Triples (or N-Quads with the data model's graph IRIs) of the facts, then the labels."""
    fact_graph = f" <{graph_iri(graph)}>" if quads else ""
    label_graph = f" <{entities_graph_iri(graph)}>" if quads else ""
    for head, relation, tail in triples:
        yield f"<{entity_iri(head)}> <{relation_iri(relation)}> <{entity_iri(tail)}>{fact_graph} .\n"
    for entity_id, label in sorted(labels.items()):
        yield f"<{entity_iri(entity_id)}> <{RDFS_LABEL}> {_literal(label)}{label_graph} .\n"
    for relation, label in sorted(relation_labels.items()):
        yield f"<{relation_iri(relation)}> <{RDFS_LABEL}> {_literal(label)}{label_graph} .\n"


def _write_atomically(path: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` to ``path`` atomically (:mod:`kgengine.fsutil`): an interrupted export
    leaves no half file; the number of lines written."""
    count = 0
    with atomic_write(path, newline="\n") as out:
        for line in lines:
            out.write(line)
            count += 1
    return count
