"""Independent expectations for the store tests: the bundled Family files read with plain
Python, and a breadth-first walk over a set of triples (the k-hop oracle)."""

from __future__ import annotations

from pathlib import Path

from kgengine.loaders.family import bundled_path
from kgengine.model import Direction, Triple


def raw_family(splits: list[str]) -> set[Triple]:
    """The distinct triples of the bundled Family split files, split on TAB by hand."""
    out = set()
    for split in splits:
        for line in (Path(bundled_path()) / f"{split}.txt").read_text().splitlines():
            h, r, t = line.split("\t")
            out.add(Triple(h, r, t))
    return out


def python_bfs(triples: set[Triple], seed: str, hops: int, direction: Direction) -> set[Triple]:
    """Every triple met walking ``hops`` steps from ``seed`` along ``direction``."""
    out_edges: dict[str, list[Triple]] = {}
    in_edges: dict[str, list[Triple]] = {}
    for t in triples:
        out_edges.setdefault(t.head, []).append(t)
        in_edges.setdefault(t.tail, []).append(t)
    frontier, seen, found = {seed}, {seed}, set()
    for _ in range(hops):
        nxt = set()
        for e in frontier:
            if direction in (Direction.OUT, Direction.BOTH):
                for t in out_edges.get(e, []):
                    found.add(t)
                    nxt.add(t.tail)
            if direction in (Direction.IN, Direction.BOTH):
                for t in in_edges.get(e, []):
                    found.add(t)
                    nxt.add(t.head)
        frontier = nxt - seen
        seen |= nxt
    return found
