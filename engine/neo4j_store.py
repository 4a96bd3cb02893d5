"""Neo4j backend: a Neo4j server (single instance, cluster or Aura) over Bolt, through the
official ``neo4j`` driver.

Data model (see ``cypher/__init__.py`` for the query conventions): ``(:Entity {graph, id,
private_id, label})`` nodes, unique on (graph, id); one relationship type per relation, the
type being the relation name itself (backtick-escaped in query text, so any name Neo4j
accepts round-trips through ``type(x)``); relation labels in ``(:Relation {graph, name,
label})`` nodes (no edges); every graph variant kept apart in one database by the ``graph``
property (Community has a single user database); load metadata in ``(:Graph {name,
dataset, status, triples, source, splits, loaded_at})``.

Connection: the URI of ``--store`` (``neo4j://``, ``bolt://``, ``neo4j+s://`` ...) plus
user / password / database from ``NEO4J_USER`` / ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE`` or
the ``[neo4j]`` table of the config file (:mod:`kgengine.config`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar

import neo4j
from kgengine.config import config_path, setting
from kgengine.errors import InvalidParameterError, KGEngineError, QueryStopped, StoreError
from kgengine.model import GraphInfo, QueryResult, Relation, Triple
from kgengine.processes import run_stoppable
from kgengine.progress import NO_PROGRESS, Reporter
from kgengine.queries import query_text, relationship_type
from kgengine.store import LoadRequest, NamedQueryStore, TripleSource, as_mapping, iter_private_ids
from neo4j.exceptions import AuthError, DriverError, Neo4jError, ServiceUnavailable, SessionExpired

# The driver logs routing failures itself before raising; our StoreError says it once.
logging.getLogger("neo4j").addHandler(logging.NullHandler())

# Rows per UNWIND batch (one transaction each). Measured with bench/neo4j.py --batch-sizes
# (FB15k-237 train, 272,115 triples, embedded Neo4j 5.26.31 with a 1 GiB heap, 2 shared
# cores, best of 2 after a warm-up load): 1k: 8.4k triples/s, 5k: 9.8k/s, 10k: 10.4k/s,
# 20k: 7.9k/s (probably the Eager buffer and transaction state of a batch in the heap). So 10k.
BATCH_SIZE = 10_000
# Rows buffered across all relations before every buffer is flushed, so that a KG with
# hundreds of relations (Wikidata5m: 822) keeps bounded memory while reading.
MAX_BUFFERED = 20 * BATCH_SIZE
DELETE_BATCH = 20_000  # relationships / nodes deleted per inner transaction
DEFAULT_CONNECTION_TIMEOUT = 10.0  # seconds to open a connection (TCP + Bolt handshake)
DEFAULT_RETRY_TIME = 15.0  # seconds a managed transaction retries transient failures

_PLACEHOLDER = re.compile(r"\{\{(?:rel:(\w+)|(\w+))\}\}")
_LIST_TYPES = (list, tuple, set, frozenset)


def _parameter(value: Any) -> Any:
    """A Cypher parameter value: Entity / Relation as plain str, collections as lists."""
    if isinstance(value, str):
        return str(value)  # str() of a str subclass is an exact str
    if isinstance(value, _LIST_TYPES):
        return [_parameter(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TypeError(f"unsupported query parameter value {value!r}")


def _relation_types(name: str, value: Any) -> str:
    if isinstance(value, Relation):
        return relationship_type(value)
    if isinstance(value, _LIST_TYPES) and value and all(isinstance(v, Relation) for v in value):
        return "|".join(relationship_type(v) for v in value)
    raise TypeError(
        f"{{{{rel:{name}}}}} needs a Relation or a non-empty list of Relations, got {value!r}"
    )


def strip_comments(text: str) -> str:
    """The query without its whole-line ``//`` comments, so that a placeholder named in a
    comment is neither filled nor required (a multi-line part would break out of it)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def render(text: str, params: Mapping[str, Any], parts: Mapping[str, str] | None = None) -> str:
    """Fill ``{{rel:NAME}}`` from the Relation parameter NAME and ``{{name}}`` from ``parts``
    (patterns generated and escaped by the caller), in one pass: text inserted for one
    placeholder is never scanned again, so a relation named ``{{body}}`` stays a name."""
    text = strip_comments(text)

    def replace(match: re.Match[str]) -> str:
        rel, part = match.groups()
        if rel is not None:
            if rel not in params:
                raise KeyError(f"query placeholder {{{{rel:{rel}}}}} has no parameter {rel!r}")
            return _relation_types(rel, params[rel])
        if parts is None or part not in parts:
            raise KeyError(f"query placeholder {{{{{part}}}}} not filled")
        return parts[part]

    return _PLACEHOLDER.sub(replace, text)


def _first_labels(labels: Iterable[tuple[str, str]] | Mapping[str, str], wanted: set[str]
                  ) -> Iterator[tuple[str, str]]:
    """The first label of each name in ``wanted`` (consumed: ``wanted`` ends up holding the
    names that had none)."""
    for name, text in as_mapping(labels):
        if name in wanted:
            wanted.discard(name)
            yield name, text


def staging_key(graph: str) -> str:
    """The ``graph`` property value a replace loads under ('/' is in no graph name)."""
    return f"{graph}/staging"


def old_key(graph: str) -> str:
    """The ``graph`` property value of a replaced graph's data until it is deleted."""
    return f"{graph}/old"


def _statements(name: str) -> list[str]:
    """The ``;``-separated statements of a backend-internal query file."""
    body = strip_comments(query_text("cypher", f"store/{name}"))
    return [s.strip() for s in body.split(";") if s.strip()]


class Neo4jStore(NamedQueryStore):
    backend: ClassVar[str] = "neo4j"
    query_language: ClassVar[str] = "cypher"
    # the driver is thread-safe and every call opens its own session (sessions are not)
    concurrent_reads: ClassVar[bool] = True
    schemes: ClassVar[tuple[str, ...]] = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")
    embedded: ClassVar[bool] = False  # a server: nothing on this machine to snapshot or serve

    def __init__(
        self,
        location: str,
        *,
        read_only: bool = False,
        create: bool = True,  # a server always holds its database: nothing to create
        auth: tuple[str, str] | None = None,
        database: str | None = None,
        connection_timeout: float | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.location = location
        self.read_only = read_only
        self.batch_size = batch_size
        self._abandoned = False  # a user's query was stopped while the driver still runs it
        if auth is None:
            auth = (
                str(setting("neo4j.user", "NEO4J_USER", "neo4j")),
                str(setting("neo4j.password", "NEO4J_PASSWORD", "")),
            )
        self._user = auth[0]
        self._database = database or setting("neo4j.database", "NEO4J_DATABASE") or None
        configured = setting("neo4j.connection_timeout", "NEO4J_CONNECTION_TIMEOUT",
                             DEFAULT_CONNECTION_TIMEOUT)
        try:
            timeout = connection_timeout or float(configured)
        except ValueError:
            raise InvalidParameterError(
                f"NEO4J_CONNECTION_TIMEOUT / [neo4j] connection_timeout must be seconds, got {configured!r}"
            ) from None
        self._schema_ready = False
        try:
            self._driver = neo4j.GraphDatabase.driver(
                location,
                auth=auth,
                connection_timeout=timeout,
                # a pool acquisition may have to open a connection: bound it the same way
                connection_acquisition_timeout=2 * timeout,
                max_transaction_retry_time=DEFAULT_RETRY_TIME,
                user_agent="kgengine",
                # "label does not exist yet" and the like are logged as warnings otherwise
                notifications_min_severity=neo4j.NotificationMinimumSeverity.OFF,
            )
        except (DriverError, ValueError) as exc:
            raise StoreError(f"invalid Neo4j URI {location!r}: {exc}") from exc
        # one bookmark manager for every session: in a cluster a read sees earlier writes
        self._bookmarks = neo4j.GraphDatabase.bookmark_manager()
        try:
            with self._errors("connecting"):
                self._driver.verify_connectivity()
        except BaseException:
            self._driver.close()
            raise

    @classmethod
    def check_location(cls, location: str, *, create: bool) -> None:
        """A server always holds its database: what the URI names is checked on connecting."""

    # ---- driver plumbing ------------------------------------------------------------------
    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Driver failures as :class:`StoreError` naming the server and what to fix."""
        try:
            yield
        except AuthError as exc:
            raise StoreError(
                f"Neo4j at {self.location} refused the credentials of user {self._user!r} "
                f"({exc.message}): set NEO4J_USER / NEO4J_PASSWORD, or [neo4j] user / password "
                f"in {config_path()}"
            ) from exc
        except (ServiceUnavailable, SessionExpired) as exc:
            raise StoreError(f"cannot reach Neo4j at {self.location} while {doing}: {exc}") from exc
        except Neo4jError as exc:
            raise StoreError(f"Neo4j error while {doing} ({exc.code}): {exc.message}") from exc
        except DriverError as exc:
            raise StoreError(f"Neo4j driver error while {doing}: {exc}") from exc

    def _session(self, write: bool = False) -> neo4j.Session:
        return self._driver.session(
            database=self._database,
            default_access_mode=neo4j.WRITE_ACCESS if write else neo4j.READ_ACCESS,
            bookmark_manager=self._bookmarks,
        )

    def _read(self, text: str, params: dict[str, Any], data: bool = False) -> list[dict[str, Any]]:
        """Rows of a read query; ``data`` turns nodes / relationships / paths into plain
        maps and lists (for users' queries; named queries return plain values anyway)."""

        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            return [record.data() if data else dict(record) for record in tx.run(text, params)]

        with self._errors("reading"), self._session() as session:
            return session.execute_read(work)

    def _write(self, text: str, params: dict[str, Any]) -> None:
        """One managed write transaction (retried on transient errors: MERGE / SET make a
        retried batch harmless)."""
        self._require_writable()

        def work(tx: neo4j.ManagedTransaction) -> None:
            tx.run(text, params).consume()

        with self._errors("writing"), self._session(write=True) as session:
            session.execute_write(work)

    def _autocommit(self, text: str, params: dict[str, Any]) -> None:
        """An auto-commit statement: needed for schema commands and CALL IN TRANSACTIONS."""
        self._require_writable()
        with self._errors("writing"), self._session(write=True) as session:
            session.run(text, params).consume()

    def _require_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"the Neo4j store {self.location} was opened read-only")

    def _internal(self, name: str) -> str:
        return query_text("cypher", f"store/{name}")

    # ---- metadata -------------------------------------------------------------------------
    @staticmethod
    def _info(meta: Mapping[str, Any]) -> GraphInfo:
        return GraphInfo(
            name=meta["name"],
            dataset=meta.get("dataset", ""),
            triples=int(meta.get("triples", 0)),
            status=meta.get("status", "complete"),
            source=meta.get("source", ""),
            splits=tuple(meta.get("splits") or ()),
            loaded_at=meta.get("loaded_at", ""),
        )

    def _graph_rows(self, name: str | None) -> list[GraphInfo]:
        rows = self._read(self._internal("graphs"), {"name": name})
        return [self._info(row["meta"]) for row in rows]

    def graphs(self) -> list[GraphInfo]:
        return self._graph_rows(None)

    def graph_info(self, graph: str) -> GraphInfo | None:
        found = self._graph_rows(graph)
        return found[0] if found else None

    def _set_meta(self, graph: str, meta: dict[str, Any]) -> None:
        self._write(self._internal("set_graph"), {"graph": graph, "meta": meta})

    # ---- loading --------------------------------------------------------------------------
    # A load first reads the whole input once (checking every line and relation name, and
    # counting, which gives the progress bar its total), so bad input fails before the store
    # is touched. A first load marks the graph 'loading' until it completes: a load killed in
    # between leaves that mark, and the next load of the graph discards the leftovers. A
    # replace of a complete graph loads the new graph under a staging key (the ``graph``
    # property value ``NAME/staging``, which no graph name can take) beside the old one, then
    # swaps keys and metadata in one transaction and only then deletes the old data (now
    # under ``NAME/old``): killed at any point, readers see the old complete graph or the new
    # one; leftovers under either key are invisible to reads and go at the next load or drop.
    # Every write is a MERGE, so a retried batch or a duplicated input triple never
    # duplicates a node or a relationship.
    def _write_graph(self, load: LoadRequest, progress: Reporter) -> GraphInfo:
        graph, swap = load.graph, load.swap
        self._ensure_schema()
        key = staging_key(graph) if swap else graph
        meta: dict[str, Any] = {
            "dataset": load.dataset,
            "status": "loading",
            "source": load.source,
            "splits": list(load.splits),
            "loaded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        # leftovers of a killed replace (both keys), and of a killed first load
        for leftover in (staging_key(graph), old_key(graph)):
            self._drop_data(leftover, progress, f"{graph}: removing leftovers of an interrupted replace")
        if not swap:
            self._set_meta(graph, meta)
            if load.existing is not None:
                self._drop_data(graph, progress, f"{graph}: discarding the stored graph "
                                f"({load.existing.status})", announce=True)
        try:
            progress.start(f"{graph}: writing {load.lines:,} triples into Neo4j", total=load.lines)
            self._merge_triples(key, load.triples, progress)
            count = self._count(key)
            progress.start(f"{graph}: entity labels and private ids", total=None)
            self._set_entities(key, load.labels, load.seed)
            self._batched("set_relation_labels", key, _first_labels(load.relation_labels, load.relations))
        except BaseException:
            # best effort: if the server is gone the leftovers stay, and the next load of
            # this graph discards them
            try:
                self._drop_data(key)
                if not swap:
                    self._write(self._internal("remove_graph"), {"graph": graph})
            except (KGEngineError, DriverError, Neo4jError):
                pass
            raise
        meta.update(status="complete", triples=count)
        if swap:
            progress.update(description=f"{graph}: switching to the new graph")
            self._write_all(_statements("swap_graph"), {"graph": graph, "staging": key,
                                                        "old": old_key(graph), "meta": meta})
            self._drop_data(old_key(graph), progress, f"{graph}: removing the replaced graph")
        else:
            self._set_meta(graph, meta)
        progress.update(description=f"{graph}: {count:,} triples loaded")
        return self._info({"name": graph, **meta})

    def _relation_check(self) -> Any:
        return relationship_type  # a name Neo4j cannot take as a relationship type fails here

    def _ensure_schema(self) -> None:
        if self._schema_ready:
            return
        for statement in _statements("schema"):
            self._autocommit(statement, {})
        with self._errors("waiting for the schema indexes"), self._session(write=True) as session:
            session.run("CALL db.awaitIndexes(300)").consume()
        self._schema_ready = True

    def _merge_triples(self, graph: str, triples: TripleSource, progress: Reporter) -> None:
        template = self._internal("merge_edges")
        buffers: dict[str, list[list[str]]] = {}
        buffered = 0

        def flush(relation: str) -> None:
            rows = buffers.pop(relation)
            text = render(template, {"relation": Relation(relation)})
            self._write(text, {"graph": graph, "rows": rows})
            progress.advance(len(rows))

        for head, relation, tail in triples:
            rows = buffers.setdefault(relation, [])
            rows.append([head, tail])
            buffered += 1
            if len(rows) >= self.batch_size:
                buffered -= len(rows)
                flush(relation)
            elif buffered >= MAX_BUFFERED:
                for name in list(buffers):
                    flush(name)
                buffered = 0
        for name in list(buffers):
            flush(name)

    def _set_entities(self, graph: str, labels: Iterable[tuple[str, str]], seed: int) -> None:
        """Private ids for every entity of the graph (the Oxigraph backend's mapping for the
        same seed), and the first label of each entity that has one."""
        entities = sorted(row["e"] for row in self.run("entities", graph))
        self._batched("set_private_ids", graph, iter_private_ids(entities, seed))
        unlabelled = set(entities)
        del entities
        self._batched("set_labels", graph, _first_labels(labels, unlabelled))

    def _batched(self, name: str, graph: str, pairs: Iterable[tuple[str, str]]) -> None:
        text = self._internal(name)
        rows: list[list[str]] = []
        for pair in pairs:
            rows.append(list(pair))
            if len(rows) >= self.batch_size:
                self._write(text, {"graph": graph, "rows": rows})
                rows = []
        if rows:
            self._write(text, {"graph": graph, "rows": rows})

    def _drop_data(self, key: str, progress: Reporter = NO_PROGRESS, doing: str = "",
                   announce: bool = False) -> None:
        """Delete the relationships, then the nodes, stored under ``key`` (a graph's name or
        one of its staging keys) in bounded transactions: one transaction for a large graph
        needs memory in proportion to its size."""
        entities = int(self._read(self._internal("count_key"), {"graph": key})[0]["n"])
        if doing and (entities or announce):
            progress.start(f"{doing} ({entities:,} entities)", total=None)
        for name in ("delete_edges", "delete_entities", "delete_relations"):
            self._autocommit(self._internal(name), {"graph": key, "batch": DELETE_BATCH})

    def _write_all(self, statements: Sequence[str], params: dict[str, Any]) -> None:
        """Several statements in one managed write transaction (all or nothing)."""
        self._require_writable()

        def work(tx: neo4j.ManagedTransaction) -> None:
            for text in statements:
                tx.run(text, params).consume()

        with self._errors("writing"), self._session(write=True) as session:
            session.execute_write(work)

    def drop(self, graph: str, progress: Reporter = NO_PROGRESS) -> None:
        """The metadata goes first: killed later, the graph is gone and its leftovers
        (invisible without metadata) are removed by the next load or drop."""
        self._require_writable()
        self.require_graph(graph)
        self._write(self._internal("remove_graph"), {"graph": graph})
        for key in (graph, staging_key(graph), old_key(graph)):
            self._drop_data(key, progress, f"{graph}: removing the graph")

    # ---- queries --------------------------------------------------------------------------
    def _rows(
        self, name: str, graph: str, params: dict[str, Any], parts: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        text = render(query_text("cypher", name), params, parts)
        values = {key: _parameter(value) for key, value in params.items()}
        values["graph"] = graph
        return self._read(text, values)

    def run_template(
        self, name: str, graph: str, parts: Mapping[str, str], **params: Any
    ) -> list[dict[str, Any]]:
        return self._rows(name, graph, params, parts)

    def query(self, text: str, graph: str | None = None) -> QueryResult:
        """A user's read-only Cypher query (``kgengine query --cypher``); ``$graph`` is the
        graph name when one is given. Nodes, relationships and paths come back as maps
        and lists."""
        params = {}
        if graph is not None:
            self.require_graph(graph)
            params["graph"] = graph
        rows = self._read(text, params, data=True)
        columns = tuple(rows[0]) if rows else ()
        return QueryResult(columns, tuple(tuple(row[c] for c in columns) for row in rows))

    def user_query(self, text: str, graph: str | None = None, *, timeout: float | None = None,
                   rdf_syntax: str | None = None,
                   warn: Callable[[str], None] | None = None) -> QueryResult:
        """Runs in a thread while the caller waits: Ctrl-C and ``timeout`` end the call at
        once, and Neo4j ends the transaction when the connection closes (at exit: closing
        the driver would wait for the abandoned query)."""
        if rdf_syntax is not None:
            raise KGEngineError(f"--format {rdf_syntax} is for SPARQL CONSTRUCT/DESCRIBE, not Cypher")
        for warning in self.check_query(text, graph):
            if warn is not None:
                warn(warning)
        try:
            return run_stoppable(lambda: self.query(text, graph), timeout)
        except (QueryStopped, KeyboardInterrupt):
            self._abandoned = True
            raise

    def triples(self, graph: str) -> Iterator[Triple]:
        """Streamed (the driver fetches records in batches), not materialised."""
        text = query_text("cypher", "all_triples")
        with self._errors("reading"), self._session() as session:
            for record in session.run(text, {"graph": graph}):
                yield Triple(record["h"], record["r"], record["t"])

    def close(self) -> None:
        if not self._abandoned:
            self._driver.close()
