"""``kgengine entity SEARCH``: find entities by id, private id or label (the search that
``kgengine ask`` links question mentions with)."""

from __future__ import annotations

import difflib
import json

import click
from kgengine.cli_common import connect, graph_option, store_option
from kgengine.errors import KGEngineError
from kgengine.model import Entity
from kgengine.rag.linking import EntityMatch, GraphEntityLinker, search_entities
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
        if store.graph_info(graph) is None:
            known = ", ".join(i.name for i in store.graphs()) or "none"
            raise KGEngineError(f"no graph {graph!r} in {store.location} (graphs: {known})")
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
