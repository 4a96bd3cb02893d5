"""The store protocol: the one interface that loading, mining, BRINK, RAG and the SPARQL
endpoint use. Backends (Oxigraph, Neo4j) are registered by URI scheme, rdflib-plugin style.

Callers never look at which backend they hold: what differs is stated by the protocol's
capabilities (``query_language``, ``concurrent_reads``) and reached through its methods
(``run`` for named queries, ``query`` for a user's own query text). Each backend declares
the locations it takes (``accepts``: URI ``schemes``, or a directory on this machine)."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeGuard, runtime_checkable

from kgengine.errors import (
    GraphExistsError,
    GraphIncompleteError,
    GraphNotFoundError,
    InvalidParameterError,
    KGEngineError,
    StoreError,
)
from kgengine.model import Direction, Entity, GraphInfo, GraphStats, QueryResult, Triple, check_graph_name
from kgengine.progress import NO_PROGRESS, Reporter
from kgengine.registry import Registry


class EmptyInputError(KGEngineError):
    """A load whose input holds no triple (refused unless an empty graph is asked for)."""


class TripleSource(Protocol):
    """Re-iterable triples (each ``iter()`` reads the input anew), as loaders produce them.

    Iteration raises :class:`kgengine.errors.InputError` on a malformed line."""

    def __iter__(self) -> Iterator[Triple]: ...


@runtime_checkable
class BlockSource(Protocol):
    """Optional fast path of a :class:`TripleSource`: the same triples as normalised TSV
    blocks, i.e. whole lines ``head<TAB>relation<TAB>tail<LF>`` whose fields are non-empty
    and hold no TAB or LF. A backend may convert a block at a time instead of a triple at a
    time; the triples are the same either way. Like ``__iter__``, ``blocks()`` reads the
    input anew and raises :class:`kgengine.errors.InputError` on a malformed line."""

    def blocks(self) -> Iterator[str]: ...


def block_fields(block: str) -> list[str]:
    """``[h1, r1, t1, h2, r2, t2, ..., '']`` of a normalised TSV block (two C-level calls);
    so heads are ``[0:-1:3]``, relations ``[1::3]``, tails ``[2::3]``."""
    fields = block.replace("\t", "\n").split("\n")
    if len(fields) != 3 * block.count("\n") + 1:
        raise ValueError("a TSV block must be whole lines of exactly three TAB-separated fields")
    return fields


@runtime_checkable
class KGStore(Protocol):
    """A knowledge-graph store holding named graphs (dataset variants).

    Thread safety (the one statement of it): when ``concurrent_reads`` is true, one store
    object may serve the reading operations (``graphs``, ``graph_info``, ``require_graph``,
    ``stats``, ``run``, ``run_template``, ``neighbourhood``, ``triples``, ``labels``,
    ``relation_labels``, ``private_ids``, ``query``) from several threads at once. Writing
    operations (``load``, ``drop``) and ``close`` need the store to themselves. Both
    backends read concurrently: pyoxigraph's store is shareable and releases the GIL, and
    the Neo4j backend opens a driver session (the unit that is not thread-safe) per call."""

    backend: ClassVar[str]  # a name for reports (stats.json); never branch on it
    query_language: ClassVar[str]  # "sparql" or "cypher": named query files run, and ``query`` text
    concurrent_reads: ClassVar[bool]  # see the class docstring
    # the URI schemes this backend takes (a server's); () for a store directory
    schemes: ClassVar[tuple[str, ...]]
    # a store directory on this machine, which ``kgengine serve`` can snapshot and serve
    embedded: ClassVar[bool]
    location: str

    @classmethod
    def check_location(cls, location: str, *, create: bool) -> None:
        """Refuse, before anything is written there, a location that cannot be (or, without
        ``create``, does not hold) a store of this backend: :class:`StoreError`."""
        ...

    def graphs(self) -> list[GraphInfo]:
        """Every named graph with its metadata (interrupted loads have status 'loading')."""
        ...

    def graph_info(self, graph: str) -> GraphInfo | None: ...

    def require_graph(self, graph: str, *, complete: bool = False) -> GraphInfo:
        """The graph's metadata; :class:`GraphNotFoundError` (naming the graphs there are)
        when it is not in the store, and with ``complete`` :class:`GraphIncompleteError`
        when it is an interrupted load."""
        ...

    def load(
        self,
        graph: str,
        triples: TripleSource,
        *,
        dataset: str,
        labels: Iterable[tuple[str, str]] = (),
        relation_labels: Iterable[tuple[str, str]] | Mapping[str, str] = (),
        source: str = "",
        splits: Sequence[str] = (),
        replace: bool = False,
        seed: int = 0,
        allow_empty: bool = True,
        progress: Reporter = NO_PROGRESS,
    ) -> GraphInfo:
        """Insert ``triples`` as graph ``graph`` in batches; idempotent (set semantics).

        ``labels`` (entity id, text) and ``relation_labels`` (relation name, text) are kept
        for the entities / relations of the graph only, the first label of each.
        Refuses an existing complete graph unless ``replace``; an interrupted load of the
        same graph is discarded and redone. With ``replace`` the input is validated in full,
        and the new graph written beside the old one and switched to in one transaction
        once complete: killed at any point, readers see the old complete graph or the new
        one. Without ``allow_empty``, input with no triples is an :class:`EmptyInputError`.
        ``progress`` names each phase (checking, writing, committing) with its total."""
        ...

    def drop(self, graph: str, progress: Reporter = NO_PROGRESS) -> None:
        """Remove the graph: its metadata first (one transaction), then its data."""
        ...

    def stats(self, graph: str) -> GraphStats: ...

    def run(self, name: str, graph: str, **params: Any) -> list[dict[str, Any]]:
        """Run the named query (``sparql/NAME.rq`` or ``cypher/NAME.cypher``) on ``graph``.

        Parameters are passed as values, never pasted: :class:`kgengine.model.Entity` and
        :class:`kgengine.model.Relation` name KG terms, other scalars are literals, and a
        list fills the query's ``VALUES ?name {}`` block. Rows map variable -> Python value
        (entity ids and relation names decoded, numbers as int/float, unbound as None)."""
        ...

    def run_template(
        self, name: str, graph: str, parts: Mapping[str, str], **params: Any
    ) -> list[dict[str, Any]]:
        """Like :meth:`run` for a query file with ``{{placeholders}}``, filled from ``parts``:
        patterns generated (and escaped) for this backend's ``query_language`` from rules,
        e.g. by :mod:`kgengine.mining.compile`. Values still go in as ``params``."""
        ...

    def order_key(self, entity: str) -> str:
        """What this backend's query ``ORDER BY`` compares for an entity id (for results
        computed outside the store in the order the store would give them)."""
        ...

    def neighbourhood(
        self,
        graph: str,
        entity: str,
        hops: int = 1,
        direction: Direction = Direction.BOTH,
        limit: int | None = None,
    ) -> list[Triple]:
        """Triples met by a breadth-first walk of ``hops`` steps (1-3) from ``entity``."""
        ...

    def triples(self, graph: str) -> Iterator[Triple]:
        """Every triple of the graph (for in-memory indexes and export)."""
        ...

    def labels(self, graph: str) -> dict[str, str]:
        """Entity id -> text label, for the entities that have one."""
        ...

    def relation_labels(self, graph: str) -> dict[str, str]:
        """Relation name -> text (e.g. FB15k-237's relation2text), where the loader had one."""
        ...

    def private_ids(self, graph: str) -> dict[str, str]:
        """The persisted seeded random entity id -> private id mapping (BRINK §5.4)."""
        ...

    def query(self, text: str, graph: str | None = None) -> QueryResult:
        """A user's read-only query in the store's ``query_language`` (``kgengine query``):
        on ``graph``, or on every graph when None. Raises :class:`QueryError` for text the
        store cannot parse."""
        ...

    def check_query(self, text: str, graph: str | None = None) -> list[str]:
        """Before a user's query runs: :class:`QueryError` for text this store refuses (an
        update, an undefined prefix), and warnings (one line each) for what will most likely
        match nothing, such as an IRI that occurs nowhere in the store."""
        ...

    def user_query(self, text: str, graph: str | None = None, *, timeout: float | None = None,
                   rdf_syntax: str | None = None,
                   warn: Callable[[str], None] | None = None) -> QueryResult:
        """:meth:`query` as ``kgengine query`` runs it: checked first (:meth:`check_query`,
        each warning passed to ``warn`` before the query runs), then stopped at once by
        Ctrl-C (which raises ``KeyboardInterrupt``) or after ``timeout`` seconds
        (:class:`kgengine.errors.QueryStopped`). ``rdf_syntax`` ("nt" or "ttl") asks for a
        CONSTRUCT / DESCRIBE result serialised in ``QueryResult.document``; a query that
        returns solutions then is a :class:`QueryError`."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> KGStore: ...

    def __exit__(self, *exc: object) -> None: ...


def _is_backend(obj: object) -> TypeGuard[type[KGStore]]:
    # NamedQueryStore is defined below: looked up when a backend loads
    return isinstance(obj, type) and issubclass(obj, NamedQueryStore)


# backend -> "module:Class", imported only when a location needs it (in this order: the
# first class whose ``schemes`` take the location's URI scheme, or that takes directories);
# a package adds one with an entry point in `kgengine.backends`
BACKENDS: Registry[type[KGStore]] = Registry("store backend", "kgengine.backends", {
    "oxigraph": "kgengine.oxigraph.store:OxigraphStore",
    "neo4j": "kgengine.neo4j_store:Neo4jStore",
}, accepts=_is_backend, expected="a kgengine.store.NamedQueryStore subclass")
_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def backend_class(location: str) -> type[KGStore]:
    """The backend class that takes ``location``: the one declaring its URI scheme, or the
    one taking store directories when it has none; :class:`StoreError` for a URI whose
    scheme no backend takes (an ``http://`` endpoint is not a store)."""
    found = _URI_SCHEME.match(location)
    scheme = found.group(1).lower() if found else None
    declared: list[str] = []
    for _, cls in BACKENDS.items():
        if scheme is None and not cls.schemes:
            return cls
        if scheme is not None and scheme in cls.schemes:
            return cls
        declared.extend(cls.schemes)
    if scheme is None:
        raise StoreError(f"no backend takes the store location {location!r}")
    raise StoreError(
        f"unsupported store URI scheme {scheme!r} in {location!r}: a store is a directory "
        f"(Oxigraph) or a URI with one of the schemes {', '.join(declared)}"
    )


def backend_for(location: str) -> str:
    """The name of the backend registered for ``location`` (see :func:`backend_class`)."""
    return backend_class(location).backend


def is_directory_location(location: str) -> bool:
    """Whether ``location`` names a store directory on this machine (an embedded store, which
    ``kgengine serve`` can serve) rather than a database server's URI."""
    return backend_class(location).embedded


def check_store_location(location: str, *, create: bool = False) -> None:
    """Refuse a location that holds no store (or, with ``create``, cannot hold one) before
    anything is written there, without opening the store."""
    backend_class(location).check_location(location, create=create)


def open_store(location: str, *, read_only: bool = False, create: bool = True) -> KGStore:
    """Open the store at ``location``: a directory (Oxigraph) or a Neo4j URI. With
    ``create`` a store directory that does not exist yet (or is empty) is created; without
    it, a location that holds no store is a :class:`StoreError`. A file, a non-empty
    directory that is not a store, and an unsupported URI scheme are always refused.

    ``read_only`` is what every command that only reads asks for: such a store never takes
    the writer's lock, so any number of readers run beside each other and beside one
    writer (on Oxigraph, each reader reads a private snapshot: docs/design.md, "The store")."""
    return backend_class(location)(location, read_only=read_only, create=create)  # type: ignore[call-arg]


def graph_not_found(graph: str, where: str, known: Iterable[str]) -> GraphNotFoundError:
    """The one "no graph" error: names the graphs there are."""
    names = ", ".join(known) or "none"
    return GraphNotFoundError(f"no graph {graph!r} in {where} (graphs: {names})")


def graph_incomplete(graph: str) -> GraphIncompleteError:
    return GraphIncompleteError(f"graph {graph!r} is incomplete (an interrupted load); reload it")


def resolve_graph(store: KGStore, graph: str | None) -> str:
    """The graph a command works on: ``graph``, or the store's only graph when None; it
    must be complete and hold triples."""
    if graph is not None and not graph.strip():
        raise InvalidParameterError("--graph must not be empty (leave it out for the default)")
    if graph is None:
        infos = store.graphs()
        if len(infos) != 1:
            known = ", ".join(i.name for i in infos) or "none"
            raise KGEngineError(f"choose a graph with --graph (graphs in {store.location}: {known})")
        graph = infos[0].name
    info = store.require_graph(graph, complete=True)
    if info.triples == 0:
        raise KGEngineError(f"graph {graph!r} has no triples")
    return graph


def read_workers(store: KGStore, requested: int | None = None, most: int = 4) -> int:
    """Threads to read with: ``requested``, else up to ``most`` (one per core) on a store
    whose reads may run concurrently, else one."""
    if requested is not None:
        return max(1, requested)
    return min(most, os.cpu_count() or 1) if store.concurrent_reads else 1


@dataclass(frozen=True)
class LoadRequest:
    """A load whose input has been read and checked, as a backend writes it."""

    graph: str
    triples: TripleSource
    dataset: str
    labels: Iterable[tuple[str, str]]
    relation_labels: Iterable[tuple[str, str]] | Mapping[str, str]
    source: str
    splits: tuple[str, ...]
    seed: int
    existing: GraphInfo | None  # what is stored under the name: a graph to replace, or an interrupted load
    lines: int  # triple lines read
    relations: set[str]  # the relations met (when the backend checks them)

    @property
    def swap(self) -> bool:
        """A replace of a complete graph (written beside it, then switched to)."""
        return self.existing is not None and self.existing.status == "complete"


class NamedQueryStore:
    """The protocol operations that are the same on every backend once it can run a named
    query and read graph metadata: ``_rows(name, graph, params)``, ``graphs()`` and
    ``graph_info(graph)`` are each backend's obligations here."""

    location: str

    def order_key(self, entity: str) -> str:
        return entity

    def _rows(self, name: str, graph: str, params: dict[str, Any]) -> Iterable[dict[str, Any]]:
        raise NotImplementedError

    def graphs(self) -> list[GraphInfo]:
        raise NotImplementedError

    def graph_info(self, graph: str) -> GraphInfo | None:
        raise NotImplementedError

    def require_graph(self, graph: str, *, complete: bool = False) -> GraphInfo:
        if not graph.strip():
            raise InvalidParameterError("--graph must not be empty (leave it out for the default)")
        info = self.graph_info(graph)
        if info is None:
            raise graph_not_found(graph, self.location, (g.name for g in self.graphs()))
        if complete and info.status != "complete":
            raise graph_incomplete(graph)
        return info

    def check_query(self, text: str, graph: str | None = None) -> list[str]:
        return []

    def _require_writable(self) -> None:
        if getattr(self, "read_only", False):
            raise StoreError(f"the store {self.location} was opened read-only")

    # ---- the load prelude, the same on every backend ---------------------------------------
    def _relation_check(self) -> Callable[[str], object] | None:
        """A check of each relation name the backend needs (it raises on a name the store
        cannot hold); None when every name is fine."""
        return None

    def _check_triples(self, triples: TripleSource, progress: Reporter) -> tuple[int, set[str]]:
        """Read all of the input once (the loader raises InputError on a malformed line):
        the number of triple lines, and the relations met when the backend checks them."""
        check = self._relation_check()
        lines = 0
        relations: set[str] = set()
        if check is None and isinstance(triples, BlockSource):
            for block in triples.blocks():  # the fast path: count lines, nothing per triple
                n = block.count("\n")
                lines += n
                progress.advance(n)
            return lines, relations
        for triple in triples:
            lines += 1
            if lines % 10_000 == 0:
                progress.advance(10_000)
            if check is not None and triple.relation not in relations:
                check(triple.relation)
                relations.add(triple.relation)
        if check is None:  # (a checking backend reports whole 10,000s only, as it always has)
            progress.advance(lines % 10_000)
        return lines, relations

    def load(
        self,
        graph: str,
        triples: TripleSource,
        *,
        dataset: str,
        labels: Iterable[tuple[str, str]] = (),
        relation_labels: Iterable[tuple[str, str]] | Mapping[str, str] = (),
        source: str = "",
        splits: Sequence[str] = (),
        replace: bool = False,
        seed: int = 0,
        allow_empty: bool = True,
        progress: Reporter = NO_PROGRESS,
    ) -> GraphInfo:
        # What every load does before the store changes: check the name, refuse an existing
        # complete graph without ``replace``, read and check all of the input (triples, then
        # labels), refuse empty input without ``allow_empty``; then the backend writes.
        check_graph_name(graph)
        self._require_writable()
        existing = self._refuse_existing(graph, replace)
        progress.start(f"{graph}: reading and checking the input", total=None)
        lines, relations = self._check_triples(triples, progress)
        if lines == 0 and not allow_empty:
            raise EmptyInputError(f"the input of graph {graph!r} ({source or dataset}) has no triples; "
                                  "pass --allow-empty to load an empty graph")
        for pairs in (labels, relation_labels):  # read again when written; fail now, not then
            for _ in as_mapping(pairs):
                pass
        return self._write_graph(LoadRequest(
            graph=graph, triples=triples, dataset=dataset, labels=labels, relation_labels=relation_labels,
            source=source, splits=tuple(splits), seed=seed, existing=existing, lines=lines,
            relations=relations), progress)

    def _write_graph(self, load: LoadRequest, progress: Reporter) -> GraphInfo:
        """Write a checked load (the backend's transaction: first load or replace)."""
        raise NotImplementedError

    def run(self, name: str, graph: str, **params: Any) -> list[dict[str, Any]]:
        return list(self._rows(name, graph, params))

    def _refuse_existing(self, graph: str, replace: bool) -> GraphInfo | None:
        """A load never overwrites a complete graph unless asked to (``--replace``); returns
        what is stored under the name (a graph to replace, or an interrupted load)."""
        existing = self.graph_info(graph)
        if existing is not None and existing.status == "complete" and not replace:
            raise GraphExistsError(
                f"graph {graph!r} already exists in {self.location} "
                f"({existing.triples:,} triples); use --replace to reload it"
            )
        return existing

    def _count(self, graph: str) -> int:
        return int(self.run("count_triples", graph)[0]["n"])

    def stats(self, graph: str) -> GraphStats:
        self.require_graph(graph)
        per_relation = {row["r"]: row["n"] for row in self._rows("relation_counts", graph, {})}
        degrees = {row["degree"]: row["n"] for row in self._rows("degree_histogram", graph, {})}
        return GraphStats(
            triples=self._count(graph),
            entities=int(self.run("count_entities", graph)[0]["n"]),
            relations=len(per_relation),
            per_relation=dict(sorted(per_relation.items())),
            degree_histogram=dict(sorted(degrees.items())),
        )

    def _expand(self, graph: str, frontier: Sequence[str], step: Direction) -> Iterator[Triple]:
        name, var = ("edges_out", "h") if step == Direction.OUT else ("edges_in", "t")
        for row in self._rows(name, graph, {var: [Entity(e) for e in frontier]}):
            yield Triple(row["h"], row["r"], row["t"])

    def neighbourhood(
        self,
        graph: str,
        entity: str,
        hops: int = 1,
        direction: Direction = Direction.BOTH,
        limit: int | None = None,
    ) -> list[Triple]:
        return breadth_first(
            lambda frontier, step: self._expand(graph, frontier, step),
            entity,
            hops,
            Direction(direction),
            limit,
        )

    def labels(self, graph: str) -> dict[str, str]:
        return {row["e"]: row["label"] for row in self._rows("entity_labels", graph, {})}

    def relation_labels(self, graph: str) -> dict[str, str]:
        return {row["r"]: row["label"] for row in self._rows("relation_labels", graph, {})}

    def private_ids(self, graph: str) -> dict[str, str]:
        return {row["e"]: row["private"] for row in self._rows("entity_private_ids", graph, {})}

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MAX_HOPS = 3


def walk(
    expand: Callable[[Sequence[str], Direction, int], Iterable[Triple]],
    entity: str,
    hops: int,
    direction: Direction,
    batch: int = 512,
    enough: Callable[[int], bool] | None = None,
) -> Iterator[tuple[int, Triple]]:
    """The one k-hop walk (``neighbourhood``, KG-RAG retrieval): breadth first from
    ``entity``, lazily, ``(hop, triple)`` for each triple the first time it is met (hop 0 =
    the entity's own triples). ``expand(frontier, OUT|IN, hop)`` returns the triples leaving
    (OUT) or entering (IN) the frontier entities; a backend supplies it as a named query. An
    entity is expanded once, at the first hop it is reached. ``enough(met)``, asked before each
    further hop with the number of triples met so far, ends the walk without querying it."""
    if not 1 <= hops <= MAX_HOPS:
        raise InvalidParameterError(f"hops must be between 1 and {MAX_HOPS}, got {hops}")
    directions = [Direction.OUT, Direction.IN] if direction == Direction.BOTH else [direction]
    seen_entities = {entity}
    frontier = [entity]
    found: set[Triple] = set()
    for hop in range(hops):
        if hop and enough is not None and enough(len(found)):
            return
        next_frontier: list[str] = []
        for start in range(0, len(frontier), batch):
            chunk = frontier[start : start + batch]
            for step in directions:
                for triple in expand(chunk, step, hop):
                    if triple in found:
                        continue
                    found.add(triple)
                    yield hop, triple
                    other = triple.tail if step == Direction.OUT else triple.head
                    if other not in seen_entities:
                        seen_entities.add(other)
                        next_frontier.append(other)
        frontier = next_frontier
        if not frontier:
            break


def breadth_first(
    expand: Callable[[Sequence[str], Direction], Iterable[Triple]],
    entity: str,
    hops: int,
    direction: Direction,
    limit: int | None = None,
) -> list[Triple]:
    """The triples of :func:`walk` in the order met, at most ``limit`` (the walk stops there)."""
    met = (triple for _, triple in walk(lambda frontier, step, _hop: expand(frontier, step), entity, hops,
                                        direction))
    return list(islice(met, limit))


def assign_private_ids(entities: Iterable[str], seed: int) -> dict[str, str]:
    """Seeded random private ids (``e`` + number), stable for a given entity set and seed."""
    return dict(iter_private_ids(sorted(set(entities)), seed))


def iter_private_ids(ordered: Sequence[str], seed: int) -> Iterator[tuple[str, str]]:
    """:func:`assign_private_ids` as a stream, for entities already sorted and distinct
    (millions of entities without building the mapping in memory); same ids."""
    numbers = list(range(len(ordered)))
    random.Random(seed).shuffle(numbers)
    width = max(len(str(len(ordered))), 1)
    for entity, number in zip(ordered, numbers, strict=True):
        yield entity, f"e{number:0{width}d}"


def as_mapping(pairs: Iterable[tuple[str, str]] | Mapping[str, str]) -> Iterator[tuple[str, str]]:
    yield from (pairs.items() if isinstance(pairs, Mapping) else pairs)


def canonical_location(store: KGStore) -> str:
    """The store's location as a cache key: an existing directory resolved (one store, one
    key however it was named), a URI as it is."""
    location = str(store.location)
    path = Path(location)
    return str(path.resolve()) if "://" not in location and path.exists() else location


