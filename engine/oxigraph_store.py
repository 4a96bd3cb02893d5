"""Oxigraph backend: an embedded RDF store in a directory on disk (pyoxigraph).

Data model: entity = IRI under ``terms.ENTITY_NS``, relation = predicate IRI under
``terms.RELATION_NS``; each graph variant is a named graph holding only KG facts, with a
companion graph ``<graph>/entities`` for ``rdfs:label`` and private ids, and load metadata
in ``terms.META_GRAPH``."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pyoxigraph as ox
from kgengine import terms
from kgengine.errors import GraphExistsError, GraphNotFoundError, StoreError
from kgengine.model import (
    Direction,
    Entity,
    GraphInfo,
    GraphStats,
    Relation,
    Triple,
    check_graph_name,
)
from kgengine.progress import NO_PROGRESS, Reporter
from kgengine.queries import fill_template, query_text
from kgengine.store import TripleSource, as_mapping, assign_private_ids, breadth_first

XSD = "http://www.w3.org/2001/XMLSchema#"
_INT_TYPES = {XSD + t for t in ("integer", "int", "long", "short", "nonNegativeInteger")}
_FLOAT_TYPES = {XSD + t for t in ("decimal", "double", "float")}
_VOCAB = terms.VOCAB_NS
_META_KEYS = ("dataset", "status", "triples", "source", "splits", "loadedAt")
CHUNK_LINES = 20_000  # lines per chunk handed to the Rust parser


def nt_literal(value: str) -> str:
    """An N-Triples string literal (escapes per the N-Triples grammar)."""
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    )
    return f'"{escaped}"'


def nt_line(triple: Triple) -> str:
    # encode_id only emits IRI-safe characters, so the IRIs need no further escaping
    e, r = terms.ENTITY_NS, terms.RELATION_NS
    enc = terms.encode_id
    return f"<{e}{enc(triple.head)}> <{r}{enc(triple.relation)}> <{e}{enc(triple.tail)}> .\n"


class _ChunkStream(io.RawIOBase):
    """A read-only byte stream over an iterator of byte chunks, so that pyoxigraph's Rust
    parser pulls N-Triples while Python produces them (bounded memory, no temp file).
    An exception from the producer is kept in ``error`` (the Rust side only sees an I/O error)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._current = memoryview(b"")
        self.error: BaseException | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._current:
            try:
                chunk = next(self._chunks, None)
            except BaseException as exc:  # re-raised by the caller with its real type
                self.error = exc
                raise OSError(str(exc)) from exc
            if chunk is None:
                return 0
            self._current = memoryview(chunk)
        n = min(len(buffer), len(self._current))
        buffer[:n] = self._current[:n]
        self._current = self._current[n:]
        return n


def _python_value(term: Any) -> Any:
    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return terms.decode_iri(term.value)
    if isinstance(term, ox.Literal):
        datatype = term.datatype.value
        if datatype in _INT_TYPES:
            return int(term.value)
        if datatype in _FLOAT_TYPES:
            return float(term.value)
        if datatype == XSD + "boolean":
            return term.value == "true"
        return term.value
    return str(term)


def _term(value: Any) -> ox.NamedNode | ox.Literal:
    if isinstance(value, Entity):
        return ox.NamedNode(terms.entity_iri(value))
    if isinstance(value, Relation):
        return ox.NamedNode(terms.relation_iri(value))
    if isinstance(value, ox.NamedNode | ox.Literal):
        return value
    if isinstance(value, bool):
        return ox.Literal("true" if value else "false", datatype=ox.NamedNode(XSD + "boolean"))
    if isinstance(value, int | float | str):
        return ox.Literal(value)
    raise TypeError(f"unsupported query parameter value {value!r}")


def _fill_values(text: str, name: str, rows: Iterable[Any]) -> str:
    """Fill the query's empty ``VALUES ?name {}`` (or ``VALUES (?a ?b) {}``) block.

    Each value becomes an RDF term serialised by pyoxigraph, so nothing is pasted raw."""
    single = f"VALUES ?{name} {{}}"
    if single in text:
        body = " ".join(str(_term(v)) for v in rows)
        return text.replace(single, f"VALUES ?{name} {{ {body} }}")
    raise KeyError(f"list parameter {name!r} needs a 'VALUES ?{name} {{}}' block in the query")


class OxigraphStore:
    backend: ClassVar[str] = "oxigraph"
    query_language: ClassVar[str] = "sparql"

    def __init__(self, location: str, *, read_only: bool = False) -> None:
        self.location = location
        path = Path(location)
        try:
            if read_only:
                self._store = ox.Store.read_only(str(path))
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._store = ox.Store(str(path))
        except OSError as exc:
            hint = ""
            if "lock" in str(exc).lower():
                hint = " (another process has it open for writing, e.g. `kgengine serve` or a load)"
            raise StoreError(f"cannot open Oxigraph store at {path}: {exc}{hint}") from exc

    # ---- metadata -------------------------------------------------------------------------
    def _meta(self, graph: str) -> dict[str, str]:
        subject = ox.NamedNode(terms.graph_iri(graph))
        out: dict[str, str] = {}
        for quad in self._store.quads_for_pattern(subject, None, None, ox.NamedNode(terms.META_GRAPH)):
            out[quad.predicate.value.removeprefix(_VOCAB)] = quad.object.value
        return out

    def _set_meta(self, graph: str, values: dict[str, str | int]) -> None:
        subject = ox.NamedNode(terms.graph_iri(graph))
        meta = ox.NamedNode(terms.META_GRAPH)
        for quad in list(self._store.quads_for_pattern(subject, None, None, meta)):
            self._store.remove(quad)
        self._store.extend(
            ox.Quad(subject, ox.NamedNode(_VOCAB + k), ox.Literal(v), meta) for k, v in values.items()
        )
        self._store.flush()

    def _info(self, graph: str, meta: dict[str, str]) -> GraphInfo:
        return GraphInfo(
            name=graph,
            dataset=meta.get("dataset", ""),
            triples=int(meta.get("triples", 0)),
            status=meta.get("status", "complete"),
            source=meta.get("source", ""),
            splits=tuple(s for s in meta.get("splits", "").split(",") if s),
            loaded_at=meta.get("loadedAt", ""),
        )

    def graphs(self) -> list[GraphInfo]:
        names = set()
        for quad in self._store.quads_for_pattern(None, None, None, ox.NamedNode(terms.META_GRAPH)):
            if quad.subject.value.startswith(terms.GRAPH_NS):
                names.add(quad.subject.value.removeprefix(terms.GRAPH_NS))
        return [self._info(name, self._meta(name)) for name in sorted(names)]

    def graph_info(self, graph: str) -> GraphInfo | None:
        meta = self._meta(graph)
        return self._info(graph, meta) if meta else None

    def _require(self, graph: str) -> GraphInfo:
        info = self.graph_info(graph)
        if info is None:
            known = ", ".join(g.name for g in self.graphs()) or "none"
            raise GraphNotFoundError(f"no graph {graph!r} in {self.location} (graphs: {known})")
        return info

    # ---- loading --------------------------------------------------------------------------
    def load(
        self,
        graph: str,
        triples: TripleSource,
        *,
        dataset: str,
        labels: Iterable[tuple[str, str]] = (),
        source: str = "",
        splits: Sequence[str] = (),
        replace: bool = False,
        seed: int = 0,
        progress: Reporter = NO_PROGRESS,
    ) -> GraphInfo:
        check_graph_name(graph)
        existing = self.graph_info(graph)
        if existing is not None and existing.status == "complete":
            if not replace:
                raise GraphExistsError(
                    f"graph {graph!r} already exists in {self.location} "
                    f"({existing.triples:,} triples); use --replace to reload it"
                )
            # validate everything first: bad input must not cost the stored graph
            for _ in triples:
                pass
        self._drop_data(graph)  # also discards what an interrupted load left behind
        meta: dict[str, str | int] = {
            "dataset": dataset,
            "status": "loading",
            "source": source,
            "splits": ",".join(splits),
            "loadedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        self._set_meta(graph, meta)
        try:
            self._bulk_triples(graph, triples, progress)
            count = self._count(graph)
            self._bulk_entities(graph, labels, seed)
        except BaseException:
            self._drop_data(graph)
            self._remove_meta(graph)
            raise
        meta.update(status="complete", triples=count)
        self._set_meta(graph, meta)
        return self._info(graph, {k: str(v) for k, v in meta.items()})

    def _bulk_triples(self, graph: str, triples: TripleSource, progress: Reporter) -> None:
        def chunks() -> Iterator[bytes]:
            lines: list[str] = []
            for triple in triples:
                lines.append(nt_line(triple))
                if len(lines) >= CHUNK_LINES:
                    yield "".join(lines).encode()
                    progress.advance(len(lines))
                    lines = []
            if lines:
                yield "".join(lines).encode()
                progress.advance(len(lines))

        self._bulk(chunks(), graph=terms.graph_iri(graph))

    def _bulk(self, chunks: Iterator[bytes], graph: str) -> None:
        stream = _ChunkStream(chunks)
        try:
            self._store.bulk_load(
                stream, format=ox.RdfFormat.N_TRIPLES, to_graph=ox.NamedNode(graph), lenient=True
            )
        except (OSError, SyntaxError) as exc:
            if stream.error is not None:
                raise stream.error from None
            raise StoreError(f"bulk load into {graph} failed: {exc}") from exc

    def _bulk_entities(self, graph: str, labels: Iterable[tuple[str, str]], seed: int) -> None:
        entities = [row["e"] for row in self._select("entities", graph, {})]
        private = assign_private_ids(entities, seed)
        label_iri, private_iri = terms.RDFS_LABEL, _VOCAB + "privateId"

        def chunks() -> Iterator[bytes]:
            lines = [
                f"<{terms.entity_iri(e)}> <{private_iri}> {nt_literal(p)} .\n"
                for e, p in private.items()
            ]
            lines.extend(
                f"<{terms.entity_iri(e)}> <{label_iri}> {nt_literal(text)} .\n"
                for e, text in as_mapping(labels)
            )
            for start in range(0, len(lines), CHUNK_LINES):
                yield "".join(lines[start : start + CHUNK_LINES]).encode()

        self._bulk(chunks(), graph=terms.entities_graph_iri(graph))

    def _count(self, graph: str) -> int:
        return int(self._select_one("count_triples", graph)["n"])

    def _drop_data(self, graph: str) -> None:
        for iri in (terms.graph_iri(graph), terms.entities_graph_iri(graph)):
            node = ox.NamedNode(iri)
            if self._store.contains_named_graph(node):
                self._store.remove_graph(node)

    def _remove_meta(self, graph: str) -> None:
        subject = ox.NamedNode(terms.graph_iri(graph))
        meta = ox.NamedNode(terms.META_GRAPH)
        for quad in list(self._store.quads_for_pattern(subject, None, None, meta)):
            self._store.remove(quad)
        self._store.flush()

    def drop(self, graph: str) -> None:
        self._require(graph)
        self._drop_data(graph)
        self._remove_meta(graph)

    # ---- queries --------------------------------------------------------------------------
    def _select(
        self, name: str, graph: str, params: dict[str, Any], parts: Mapping[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        text = query_text("sparql", name)
        if parts is not None:
            text = fill_template(text, parts)
        substitutions = {}
        # a query whose header says "# graph: entities" reads the companion labels graph
        on_entities = "\n# graph: entities" in "\n" + text
        target = terms.entities_graph_iri(graph) if on_entities else terms.graph_iri(graph)
        for key, value in params.items():
            if isinstance(value, list | tuple | set | frozenset):
                text = _fill_values(text, key, value)
            else:
                substitutions[ox.Variable(key)] = _term(value)
        result = self._store.query(
            text,
            default_graph=ox.NamedNode(target),
            substitutions=substitutions or None,
        )
        if isinstance(result, ox.QueryBoolean):
            yield {"result": bool(result)}
            return
        variables = [v.value for v in result.variables]
        for solution in result:
            yield {v: _python_value(solution[v]) for v in variables}

    def run_template(
        self, name: str, graph: str, parts: Mapping[str, str], **params: Any
    ) -> list[dict[str, Any]]:
        return list(self._select(name, graph, params, parts))

    def _select_one(self, name: str, graph: str, **params: Any) -> dict[str, Any]:
        return next(self._select(name, graph, params))

    def run(self, name: str, graph: str, **params: Any) -> list[dict[str, Any]]:
        return list(self._select(name, graph, params))

    def sparql(self, query: str, graph: str | None = None) -> Any:
        """A user's SPARQL query, as pyoxigraph results; default graph = ``graph`` or the
        union of all graphs."""
        if graph is not None:
            self._require(graph)
            return self._store.query(query, default_graph=ox.NamedNode(terms.graph_iri(graph)))
        return self._store.query(query, use_default_graph_as_union=True)

    def stats(self, graph: str) -> GraphStats:
        self._require(graph)
        per_relation = {row["r"]: row["n"] for row in self._select("relation_counts", graph, {})}
        degrees = {row["degree"]: row["n"] for row in self._select("degree_histogram", graph, {})}
        return GraphStats(
            triples=self._count(graph),
            entities=int(self._select_one("count_entities", graph)["n"]),
            relations=len(per_relation),
            per_relation=dict(sorted(per_relation.items())),
            degree_histogram=dict(sorted(degrees.items())),
        )

    def _expand(self, graph: str, frontier: Sequence[str], step: Direction) -> Iterator[Triple]:
        name, var = ("edges_out", "h") if step == Direction.OUT else ("edges_in", "t")
        for row in self._select(name, graph, {var: [Entity(e) for e in frontier]}):
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

    def triples(self, graph: str) -> Iterator[Triple]:
        for row in self._select("all_triples", graph, {}):
            yield Triple(row["h"], row["r"], row["t"])

    def labels(self, graph: str) -> dict[str, str]:
        return {row["e"]: row["label"] for row in self._select("entity_labels", graph, {})}

    def private_ids(self, graph: str) -> dict[str, str]:
        rows = self._select("entity_private_ids", graph, {})
        return {row["e"]: row["private"] for row in rows}

    def close(self) -> None:
        self._store.flush()
        del self._store

    def __enter__(self) -> OxigraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
