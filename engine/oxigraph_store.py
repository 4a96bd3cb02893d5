"""Oxigraph backend: an embedded RDF store in a directory on disk (pyoxigraph).

Data model: entity = IRI under ``terms.ENTITY_NS``, relation = predicate IRI under
``terms.RELATION_NS``; each graph variant is a named graph holding only KG facts, with a
companion graph ``<graph>/entities`` for ``rdfs:label`` and private ids, and load metadata
in ``terms.META_GRAPH``."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from itertools import chain, islice, repeat
from pathlib import Path
from typing import Any, BinaryIO, ClassVar
from urllib.parse import quote

import pyoxigraph as ox
from kgengine import sparqltext, terms
from kgengine.errors import KGEngineError, QueryError, StoreError, StoreLockedError
from kgengine.model import (
    Entity,
    GraphInfo,
    QueryResult,
    Relation,
    Triple,
)
from kgengine.processes import run_job, spawn, stop
from kgengine.progress import NO_PROGRESS, Reporter
from kgengine.queries import fill_template, query_text
from kgengine.store import (
    BlockSource,
    LoadRequest,
    NamedQueryStore,
    TripleSource,
    as_mapping,
    block_fields,
    iter_private_ids,
)

XSD = "http://www.w3.org/2001/XMLSchema#"
_INT_TYPES = {XSD + t for t in ("integer", "int", "long", "short", "nonNegativeInteger")}
_FLOAT_TYPES = {XSD + t for t in ("decimal", "double", "float")}
_VOCAB = terms.VOCAB_NS
CHUNK_LINES = 20_000  # lines per chunk when formatting one triple or entity at a time
DELETE_BATCH = 20_000  # quads removed per batch when discarding a graph (bounded memory)
SPOOL_PREFIX = ".kgengine-spool-"  # temporary N-Quads in the store directory (no pipes)
# the Rust loader reads a pipe by path (/dev/fd/N) without the GIL; elsewhere, a spool file
USE_PIPES = os.name == "posix" and Path("/dev/fd").is_dir()
_ABORT = b"\n!kgengine-abort\n"  # not N-Quads: makes the Rust parser stop with an error
_F_SETPIPE_SZ = 1031  # Linux fcntl: a bigger pipe buffer means fewer switches between threads
_LITERAL_SPECIALS = re.compile(r'[\\"\n\r]')


def nt_literal(value: str) -> str:
    """An N-Triples string literal (escapes per the N-Triples grammar)."""
    if _LITERAL_SPECIALS.search(value) is None:  # the common case: one C-level scan
        return f'"{value}"'
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    )
    return f'"{escaped}"'


# Percent-encoding is per character, so encoding a whole TSV block (TAB and LF left alone)
# gives, field by field, exactly terms.encode_id of each field, in a few C-level calls.
_ASCII_ESCAPES = sorted(
    ((c, quote(c, safe="")) for c in map(chr, range(128)) if terms.encode_id(c) != c and c not in "\t\n"),
    key=lambda pair: pair[0] != "%",  # '%' first: the other codes contain '%'
)
_NEEDS_ESCAPE = re.compile("[" + re.escape("".join(c for c, _ in _ASCII_ESCAPES)) + r"]|[^\x00-\x7f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


@lru_cache(maxsize=65_536)
def _quote_run(run: str) -> str:
    return quote(run, safe="")


def _quote_match(match: re.Match[str]) -> str:
    return _quote_run(match.group())  # the same accented runs come back again and again


def escape_block(block: str) -> str:
    """``terms.encode_id`` applied to every field of a normalised TSV block."""
    if _NEEDS_ESCAPE.search(block) is None:
        return block
    for char, code in _ASCII_ESCAPES:
        if char in block:
            block = block.replace(char, code)
    if not block.isascii():
        block = _NON_ASCII.sub(_quote_match, block)
    return block


def _entity_iris(ordered: Sequence[str], chunk: int = 100_000) -> Iterator[str]:
    """``terms.entity_iri`` of many ids, escaped a chunk at a time in one pass where no id
    holds TAB or LF."""
    prefix = terms.ENTITY_NS
    for start in range(0, len(ordered), chunk):
        ids = ordered[start : start + chunk]
        joined = "\n".join(ids)
        if "\t" in joined or joined.count("\n") != len(ids) - 1:
            yield from map(terms.entity_iri, ids)
        else:
            yield from (prefix + e for e in escape_block(joined).split("\n"))


class _QuadWriter:
    """Writes the N-Quads of a load to a binary stream: facts, then private ids and labels,
    keeping the sets of entity ids and relation names met on the way."""

    def __init__(self, out: BinaryIO, graph: str, slot: str = "") -> None:
        facts_iri, entities_iri = slot_iris(graph, slot)
        self.out = out
        self.lines = 0
        self._entities: set[str] = set()
        self._relations: set[str] = set()
        self._facts_end = f"> <{facts_iri}> .\n"
        self._entities_end = f" <{entities_iri}> .\n"

    def _write_text(self, text: str, lines: int, progress: Reporter = NO_PROGRESS) -> None:
        self.out.write(text.encode())
        self.lines += lines
        progress.advance(lines)

    def _write(self, lines: list[str], progress: Reporter = NO_PROGRESS) -> None:
        self._write_text("".join(lines), len(lines), progress)

    def add_triples(self, triples: TripleSource, progress: Reporter) -> None:
        subject, to_object = "<" + terms.ENTITY_NS, "> <" + terms.ENTITY_NS
        to_relation, end = "> <" + terms.RELATION_NS, self._facts_end
        entities, relations = self._entities, self._relations
        if isinstance(triples, BlockSource):
            for block in triples.blocks():
                escaped = escape_block(block)
                enc = block_fields(escaped)
                raw = enc if escaped is block else block_fields(block)
                entities.update(raw[0:-1:3])  # the last item is the '' after the final LF
                entities.update(raw[2::3])
                relations.update(raw[1::3])
                parts = zip(repeat(subject), enc[0::3], repeat(to_relation), enc[1::3],
                            repeat(to_object), enc[2::3], repeat(end))
                self._write_text("".join(chain.from_iterable(parts)), len(enc) // 3, progress)
            return
        encode = terms.encode_id
        for chunk in _batched(triples, CHUNK_LINES):
            for head, relation, tail in chunk:
                entities.add(head)
                entities.add(tail)
                relations.add(relation)
            self._write([f"{subject}{encode(h)}{to_relation}{encode(r)}{to_object}{encode(t)}{end}"
                         for h, r, t in chunk], progress)

    def add_entities(self, labels: Iterable[tuple[str, str]], seed: int) -> None:
        """Private ids of every entity met, and the first label of each that has one
        (labels of entities not in the graph are skipped)."""
        ordered = sorted(self._entities)
        private_iri = f"> <{_VOCAB}privateId> "
        end = self._entities_end
        pairs = zip(iter_private_ids(ordered, seed), _entity_iris(ordered), strict=True)
        for chunk in _batched(pairs, CHUNK_LINES):
            # private ids are letters and digits: no literal escaping needed
            self._write([f'<{iri}{private_iri}"{private}"{end}' for (_, private), iri in chunk])
        del ordered, pairs
        unlabelled = self._entities
        self._entities = set()
        label_iri = f"> <{terms.RDFS_LABEL}> "
        for chunk in _batched(as_mapping(labels), CHUNK_LINES):
            kept = []
            for entity, text in chunk:
                if entity in unlabelled:
                    unlabelled.discard(entity)
                    kept.append((entity, text))
            iris = _entity_iris([entity for entity, _ in kept])
            self._write([f"<{iri}{label_iri}{nt_literal(text)}{end}"
                         for iri, (_, text) in zip(iris, kept, strict=True)])

    def add_relation_labels(self, labels: Iterable[tuple[str, str]] | Mapping[str, str]) -> None:
        """The first label of each relation of the graph, as ``rdfs:label`` of the relation
        IRI in the companion graph (labels of relations not in the graph are skipped)."""
        label_iri = f"> <{terms.RDFS_LABEL}> "
        unlabelled = self._relations
        kept = []
        for relation, text in as_mapping(labels):
            if relation in unlabelled:
                unlabelled.discard(relation)
                kept.append(f"<{terms.relation_iri(relation)}{label_iri}{nt_literal(text)}{self._entities_end}")
        self._write(kept)


def _batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


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


def _lexical(term: Any) -> str | None:
    """A user's query cell: the term's value (IRI, literal text, blank node id)."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode | ox.Literal | ox.BlankNode):
        return term.value
    return str(term)  # an RDF-star quoted triple


MAX_IRI_CHECKS = 50  # kgengine IRIs of one user's query looked up in the store (warnings)
UNLIMITED = 2**62  # the worker's row and byte caps: a local query returns everything
RDF_SYNTAXES = {"nt": ("application/n-triples", "N-Triples"), "ttl": ("text/turtle", "Turtle")}


def _worker_answer(text: str, prefixes: dict[str, str], header: dict[str, Any], body: bytes,
                   rdf_syntax: str | None) -> QueryResult:
    """A query worker's answer (SPARQL JSON results, or N-Triples / Turtle) as a result."""
    status = header.get("status")
    if status == 400:
        message = sparqltext.short_syntax_error(header.get("error", ""), text, prefixes)
        raise QueryError(f"invalid SPARQL: {message}")
    if status != 200:
        raise KGEngineError(header.get("error", f"the query failed (status {status})"))
    media = header.get("type", "").split(";")[0].strip()
    if rdf_syntax is not None:
        if media != RDF_SYNTAXES[rdf_syntax][0]:
            raise QueryError(f"{RDF_SYNTAXES[rdf_syntax][1]} output ({rdf_syntax}) is for CONSTRUCT and "
                             "DESCRIBE queries; this query returns solutions (as a table, JSON, CSV or TSV)")
        return QueryResult(("subject", "predicate", "object"), document=body)
    if media == "application/n-triples":
        rows = tuple((_lexical(t.subject), _lexical(t.predicate), _lexical(t.object))
                     for t in ox.parse(body, format=ox.RdfFormat.N_TRIPLES))
        return QueryResult(("subject", "predicate", "object"), rows)
    document = json.loads(body)
    if "boolean" in document:
        return QueryResult(boolean=bool(document["boolean"]))
    columns = sparqltext.star_columns(text, list(document["head"]["vars"]))
    rows = tuple(tuple(_json_cell(binding.get(c)) for c in columns)
                 for binding in document["results"]["bindings"])
    return QueryResult(tuple(columns), rows)


def _json_cell(term: dict[str, Any] | None) -> str | None:
    """A SPARQL JSON term's lexical value, as ``query`` gives it in-process (``_lexical``)."""
    if term is None:
        return None
    if term.get("type") == "triple":  # RDF-star: << s p o >>
        parts = term["value"]
        inner = " ".join(_json_cell(parts[k]) or "" for k in ("subject", "predicate", "object"))
        return f"<< {inner} >>"
    return term.get("value")


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


# A graph's two slots of named graphs (facts, labels): "" is the graph's own IRI (what a
# first load uses), "b" the other one that a --replace writes beside it (see load).
OTHER_SLOT = {"": "b", "b": ""}


def slot_iris(graph: str, slot: str) -> tuple[str, str]:
    """The (facts, labels) named graph IRIs of ``graph``'s slot (graph names hold no '/')."""
    if not slot:
        return terms.graph_iri(graph), terms.entities_graph_iri(graph)
    base = f"{terms.graph_iri(graph)}/{slot}"
    return base, base + "/entities"


def is_store_directory(path: Path) -> bool:
    """Whether ``path`` holds an Oxigraph store (its RocksDB ``CURRENT`` file)."""
    return (path / "CURRENT").is_file()


# ---- snapshots: how readers (and `kgengine serve`) share a store with its writer ---------------
# A store opened with ``Store.read_only`` while another process writes to it is "undefined
# behaviour" in pyoxigraph's words (0.5 has no secondary mode), and measured so: after a
# writer compacted the store, a read-only handle failed with ``IO error: No such file or
# directory: …/000079.sst`` on a file it had not opened yet. So a reader never reads the live
# store: it takes a RocksDB checkpoint (``Store.backup``: hard links to the store's immutable
# SST files plus a copy of its small metadata, milliseconds on the same file system), copies
# the write-ahead logs too (data a running writer committed but has not flushed), and opens
# that read-only. The writer may then compact and delete whatever it likes.
SNAPSHOT_ATTEMPTS = 20  # a checkpoint races a writer's compaction or log rotation: retry


def snapshot_root(store: Path, purpose: str) -> Path:
    """Where snapshots of ``store`` for ``purpose`` ("read": reading commands, "serve") live:
    beside the store, so that hard links work."""
    return store.parent / f".{store.name}.{purpose}"


def remove_stale(root: Path) -> None:
    """Remove the snapshots (named ``<pid>-<n>``) of processes that are no longer running."""
    if not root.is_dir():
        return
    import psutil  # here, not at the top: 70 ms of every command's start

    for entry in root.iterdir():
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _wal_files(store: Path) -> set[str]:
    return {p.name for p in store.glob("*.log")}


def take_snapshot(store: Path, target: Path) -> Path:
    """A consistent, private copy of ``store`` at ``target`` (which must not exist)."""
    _snapshot_opened(store, target)
    return target


def _snapshot_opened(store: Path, target: Path) -> ox.Store:
    """:func:`take_snapshot`, and the snapshot opened read-only (it must open)."""
    if not is_store_directory(store):
        raise OSError(f"no Oxigraph store at {store} (run `kgengine load` first)")
    error: OSError | None = None
    for attempt in range(SNAPSHOT_ATTEMPTS):
        for leftover in (target, target.with_name(target.name + ".tmp")):
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            # (again on each attempt: another reader closing removes the shared folder when empty)
            target.parent.mkdir(parents=True, exist_ok=True)
            logs_before = _wal_files(store)
            source = ox.Store.read_only(str(store))
            try:
                source.backup(str(target))
            finally:
                del source
            # a read-only handle cannot flush, so its checkpoint lacks what is still only
            # in the write-ahead log; copying the logs lets the snapshot replay it
            for name in _wal_files(store):
                shutil.copy2(store / name, target / name)
            if not logs_before <= _wal_files(store):
                raise OSError("the store's log rotated while the snapshot was taken")
            return ox.Store.read_only(str(target))  # it must open
        except (OSError, RuntimeError) as exc:
            # FileNotFoundError included: a file went away mid-copy; RocksDB says "Corruption:
            # ... No such file" (a RuntimeError) when a writer's compaction removed an SST file
            # between its listing and its opening: both pass on a new attempt
            error = OSError(str(exc))
            time.sleep(0.05 * (attempt + 1))
    shutil.rmtree(target, ignore_errors=True)
    raise OSError(f"could not snapshot the store at {store}: {error}")


_reader_snapshots = itertools.count(1)  # next() on it is atomic: threads never share a snapshot name


def _reader_snapshot(store: Path) -> tuple[Path, ox.Store] | None:
    """A private snapshot for one reading store object, opened, or None where nothing can
    be written beside the store (then the live store is read as it is)."""
    root = snapshot_root(store, "read")
    try:
        root.mkdir(exist_ok=True)
        remove_stale(root)
    except OSError:
        return None
    target = root / f"{os.getpid()}-{next(_reader_snapshots)}"
    try:
        return target, _snapshot_opened(store, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            root.rmdir()
        raise StoreError(f"cannot open Oxigraph store at {store} for reading: {exc}") from exc


def _remove_snapshot_dir(snapshot: Path | None) -> None:
    if snapshot is not None:
        shutil.rmtree(snapshot, ignore_errors=True)
        with contextlib.suppress(OSError):  # leave no empty .<store>.read directory behind
            snapshot.parent.rmdir()


def lock_holder(store: Path) -> str | None:
    """The process that holds the store's RocksDB lock (``LOCK``), as "pid N (command
    line)", from the kernel's table of file locks; None where that cannot be told."""
    import psutil

    try:
        lock = (store / "LOCK").stat()
        with open("/proc/locks", encoding="ascii") as table:
            entries = table.read().splitlines()
    except OSError:
        return None
    for entry in entries:
        fields = entry.split()
        # "1: POSIX  ADVISORY  WRITE 4242 08:01:131 0 EOF" (blocked waiters start "-> ")
        if len(fields) < 6 or fields[1] == "->" or not fields[4].lstrip("-").isdigit():
            continue
        device_inode = fields[5].split(":")
        if len(device_inode) == 3 and device_inode[2] == str(lock.st_ino):
            pid = int(fields[4])
            if pid <= 0:
                return "another process"
            try:
                process = psutil.Process(pid)
                argv = process.cmdline()
                if "kgengine.serve.worker" in argv and (parent := process.parent()) is not None:
                    # an --allow-update server's writer worker: the server is what to name
                    return f"{_describe(parent.pid, parent.cmdline())}, through its query worker pid {pid}"
            except psutil.Error:
                return f"pid {pid}"
            return _describe(pid, argv)
    return None


def _describe(pid: int, argv: list[str]) -> str:
    """"pid N (command line)", the command as typed ("kgengine mine …", not the interpreter)."""
    if len(argv) > 1 and Path(argv[0]).name.startswith("python") and not argv[1].startswith("-"):
        argv = argv[1:]  # "python …/bin/kgengine mine …": the script is what says it
    command = " ".join([Path(argv[0]).name, *argv[1:]]) if argv else ""
    if len(command) > 160:
        command = command[:157] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def check_location(path: Path, *, create: bool) -> None:
    """Refuse what is not a store directory before RocksDB writes anything there: a file,
    a non-empty directory that holds no store, and (without ``create``) a missing store."""
    if path.is_file() or (path.exists() and not path.is_dir()):
        raise StoreError(f"{path} is a file, not a store directory")
    if is_store_directory(path):
        return
    if path.is_dir() and any(path.iterdir()):
        if create:
            raise StoreError(f"{path} is not empty and holds no kgengine store: give `--store` a new "
                             "or empty directory, or an existing store")
        raise StoreError(f"no kgengine store at {path} (it is a directory with other files)")
    if not create:
        raise StoreError(f"no kgengine store at {path} (create one with `kgengine load …`)")


class OxigraphStore(NamedQueryStore):
    """An Oxigraph store directory. Read-write, it holds the store's one writer lock (a
    second writer is refused naming the holder); read-only, it reads a private snapshot
    taken when it opens and removed when it closes, so readers never wait for, block or
    trip over a writer (and see the store as it was when they opened it)."""

    backend: ClassVar[str] = "oxigraph"
    query_language: ClassVar[str] = "sparql"
    concurrent_reads: ClassVar[bool] = True  # pyoxigraph's Store is shared by threads, GIL released
    schemes: ClassVar[tuple[str, ...]] = ()  # a directory, not a URI
    embedded: ClassVar[bool] = True

    def __init__(self, location: str, *, read_only: bool = False, create: bool = True) -> None:
        self.read_only = read_only
        self.location = location
        self._snapshot: Path | None = None
        path = Path(location)
        check_location(path, create=create and not read_only)
        try:
            if read_only:
                taken = _reader_snapshot(path)
                if taken is None:
                    self._store = ox.Store.read_only(str(path))
                else:
                    self._snapshot, self._store = taken
            else:
                path.mkdir(parents=True, exist_ok=True)
                self._store = ox.Store(str(path))
        except OSError as exc:
            self._remove_snapshot()
            if "lock" in str(exc).lower():
                holder = lock_holder(path) or "another process"
                raise StoreLockedError(
                    f"the store {path} is locked by another writer, {holder}: wait for it to finish "
                    "(commands that only read, such as query, graphs and stats, run meanwhile)"
                ) from exc
            raise StoreError(f"cannot open Oxigraph store at {path}: {exc}") from exc

    @classmethod
    def check_location(cls, location: str, *, create: bool) -> None:
        check_location(Path(location), create=create)

    @classmethod
    def wrap(cls, handle: ox.Store, location: str, *, read_only: bool = True) -> OxigraphStore:
        """A store object around an open pyoxigraph store (a serve worker's snapshot)."""
        store = cls.__new__(cls)
        store.read_only, store.location, store._snapshot, store._store = read_only, location, None, handle
        return store

    @property
    def read_path(self) -> str:
        """The directory this object reads: its snapshot, or the store itself."""
        return str(self._snapshot or self.location)

    def _remove_snapshot(self) -> None:
        _remove_snapshot_dir(self._snapshot)
        self._snapshot = None

    # ---- metadata -------------------------------------------------------------------------
    # A graph's facts and labels live in one of two slots of named graphs (see slot_iris);
    # its metadata says which ("slot"), so that ``--replace`` writes the new graph into the
    # other slot and switches to it in one small transaction (docs/data-model.md).
    def _meta(self, graph: str) -> dict[str, str]:
        subject = ox.NamedNode(terms.graph_iri(graph))
        out: dict[str, str] = {}
        for quad in self._store.quads_for_pattern(subject, None, None, ox.NamedNode(terms.META_GRAPH)):
            out[quad.predicate.value.removeprefix(_VOCAB)] = quad.object.value
        return out

    def _set_meta(self, graph: str, values: Mapping[str, str | int]) -> None:
        """Replace the graph's metadata in one transaction (a SPARQL update is one): a kill
        leaves the old metadata or the new, never a mix."""
        subject = f"<{terms.graph_iri(graph)}>"
        facts = " ".join(f"{subject} <{_VOCAB}{k}> {ox.Literal(str(v))} ." for k, v in values.items())
        self._store.update(
            f"DELETE WHERE {{ GRAPH <{terms.META_GRAPH}> {{ {subject} ?p ?o }} }} ;\n"
            f"INSERT DATA {{ GRAPH <{terms.META_GRAPH}> {{ {facts} }} }}"
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

    def data_graph_iris(self, graph: str) -> tuple[str, str]:
        """The named graphs (facts, labels) that hold ``graph`` now: what a SPARQL query
        written by hand should name (they change with each ``--replace``)."""
        return slot_iris(graph, self._meta(graph).get("slot", ""))

    def live_graph_iris(self) -> list[str]:
        """The metadata graph and every graph's live slot: the union that a query without
        ``--graph`` sees (a replace's staging slot and leftovers of a killed one excluded)."""
        iris = [terms.META_GRAPH]
        for info in self.graphs():
            iris.extend(self.data_graph_iris(info.name))
        return iris

    # ---- loading --------------------------------------------------------------------------
    # A load reads (and so checks) all of its input first: a malformed line fails before the
    # store changes. The input is then converted to N-Quads by a Python thread and streamed
    # through a pipe into pyoxigraph's Rust bulk loader, which reads the pipe natively (no
    # GIL), so conversion and loading run side by side.
    # A first load marks the graph 'loading' from the moment stored data changes until it
    # completes: a load killed in between leaves that mark, and the next load discards the
    # leftovers. A replace of a complete graph writes the new graph into the graph's other
    # slot while the old one stays as it is, then switches the metadata to the new slot in
    # one transaction and only then removes the old slot: killed at any point, the store
    # holds the old complete graph or the new complete one (leftovers in the slot that is
    # not live are invisible to reads and removed by the next load or drop).
    def _write_graph(self, load: LoadRequest, progress: Reporter) -> GraphInfo:
        graph, existing, swap = load.graph, load.existing, load.swap
        old_meta = self._meta(graph)
        old_slot = old_meta.get("slot", "")
        slot = OTHER_SLOT[old_slot] if swap else ""
        meta: dict[str, str | int] = {
            "dataset": load.dataset,
            "status": "loading",
            "source": load.source,
            "splits": ",".join(load.splits),
            "loadedAt": datetime.now(UTC).isoformat(timespec="seconds"),
            "slot": slot,
        }
        # leftovers: a killed replace's staging (swap) or a killed first load (both slots)
        if swap:
            self._clear_slots(graph, [slot], progress, "removing leftovers of an interrupted replace")
        elif existing is not None:
            self._clear_slots(graph, list(OTHER_SLOT), progress,
                              f"discarding the stored graph ({existing.status})", announce=True)
        else:
            self._clear_slots(graph, list(OTHER_SLOT), progress)
        if not swap:
            self._set_meta(graph, meta)
        facts_iri, _ = slot_iris(graph, slot)
        try:
            progress.start(f"{graph}: bulk loading: writing {load.lines:,} triples", total=load.lines)

            def write(out: BinaryIO) -> None:
                writer = _QuadWriter(out, graph, slot)
                writer.add_triples(load.triples, progress)
                progress.update(description=f"{graph}: writing labels and private ids")
                writer.add_entities(load.labels, load.seed)
                writer.add_relation_labels(load.relation_labels)
                progress.update(description=f"{graph}: indexing and committing")

            self._bulk_stream(write, graph)
            count = self._count_iri(facts_iri)
        except BaseException:
            self._clear_slots(graph, [slot])  # on a replace, the old graph was never touched
            if not swap:
                self._remove_meta(graph)
            raise
        meta.update(status="complete", triples=count)
        switching = "switching to the new graph" if swap else "marking the graph complete"
        progress.update(description=f"{graph}: {switching}")
        self._set_meta(graph, meta)  # the commit point of a replace
        if swap:
            self._clear_slots(graph, [old_slot], progress, "removing the replaced graph")
        progress.update(description=f"{graph}: {count:,} triples loaded")
        return self._info(graph, {k: str(v) for k, v in meta.items()})

    def _count_iri(self, iri: str) -> int:
        result = self._store.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
                                   default_graph=ox.NamedNode(iri))
        return int(next(iter(result))["n"].value)

    def _bulk_stream(self, write: Callable[[BinaryIO], None], graph: str) -> None:
        """Bulk load the N-Quads that ``write`` produces: through a pipe read natively by
        the Rust loader while ``write`` runs in a thread; where there are no pipes to open
        by path, through a spool file in the store directory."""
        if not USE_PIPES:
            self._bulk_spooled(write, graph)
            return
        read_fd, write_fd = os.pipe()
        with contextlib.suppress(ImportError, OSError):
            import fcntl  # POSIX only, like the pipes

            fcntl.fcntl(write_fd, _F_SETPIPE_SZ, 1 << 20)
        failure: list[BaseException] = []

        def produce() -> None:
            try:
                with open(write_fd, "wb") as out:
                    try:
                        write(out)
                    except BrokenPipeError:
                        raise
                    except BaseException as exc:  # re-raised in the calling thread
                        failure.append(exc)
                        out.write(_ABORT)
            except BrokenPipeError:
                pass  # the loader stopped reading: its own error is reported

        producer = threading.Thread(target=produce, name=f"kgengine-load-{graph}", daemon=True)
        producer.start()
        error: BaseException | None = None
        try:
            self._store.bulk_load(path=f"/dev/fd/{read_fd}", format=ox.RdfFormat.N_QUADS, lenient=True)
        except (OSError, SyntaxError) as exc:
            error = exc
        finally:
            os.close(read_fd)  # unblocks a producer still writing
            producer.join()
        if failure:
            raise failure[0]
        if error is not None:
            raise StoreError(f"bulk load of graph {graph!r} failed: {error}") from error

    def _bulk_spooled(self, write: Callable[[BinaryIO], None], graph: str) -> None:
        root = Path(self.location)
        for stale in root.glob(SPOOL_PREFIX + "*"):  # left by a killed load
            stale.unlink(missing_ok=True)
        fd, name = tempfile.mkstemp(prefix=SPOOL_PREFIX, suffix=".nq", dir=root)
        try:
            with open(fd, "wb") as out:
                write(out)
            self._store.bulk_load(path=name, format=ox.RdfFormat.N_QUADS, lenient=True)
        except (OSError, SyntaxError) as exc:
            raise StoreError(f"bulk load of graph {graph!r} failed: {exc}") from exc
        finally:
            Path(name).unlink(missing_ok=True)

    def _clear_slots(self, graph: str, slots: Sequence[str], progress: Reporter = NO_PROGRESS,
                     doing: str = "removing leftovers of an interrupted load or drop",
                     announce: bool = False) -> None:
        """Remove the quads of the graph's ``slots`` in batches (one transaction for a whole
        large graph, ``remove_graph``, takes memory in proportion to its size)."""
        nodes = [ox.NamedNode(iri) for slot in slots for iri in slot_iris(graph, slot)]
        nodes = [node for node in nodes if self._store.contains_named_graph(node)]
        if not nodes:
            if announce:  # say what happens to the stored graph even when nothing of it was written
                progress.start(f"{graph}: {doing} (0 quads)", total=0)
            return
        total = sum(self._count_iri(node.value) for node in nodes)
        progress.start(f"{graph}: {doing} ({total:,} quads)", total=total)
        for node in nodes:
            for batch in _batched(self._store.quads_for_pattern(None, None, None, node), DELETE_BATCH):
                for quad in batch:
                    self._store.remove(quad)
                progress.advance(len(batch))
            self._store.remove_graph(node)
        self._store.flush()

    def _remove_meta(self, graph: str) -> None:
        subject = terms.graph_iri(graph)
        self._store.update(f"DELETE WHERE {{ GRAPH <{terms.META_GRAPH}> {{ <{subject}> ?p ?o }} }}")
        self._store.flush()

    def drop(self, graph: str, progress: Reporter = NO_PROGRESS) -> None:
        """The metadata goes first (one transaction): killed later, the graph is gone and
        its leftover quads, invisible to reads, are removed by the next load or drop."""
        self.require_graph(graph)
        self._remove_meta(graph)
        self._clear_slots(graph, list(OTHER_SLOT), progress, "removing the graph")

    # ---- queries --------------------------------------------------------------------------
    def _rows(
        self, name: str, graph: str, params: dict[str, Any], parts: Mapping[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        text = query_text("sparql", name)
        if parts is not None:
            text = fill_template(text, parts)
        substitutions = {}
        # a query whose header says "# graph: entities" reads the companion labels graph
        on_entities = "\n# graph: entities" in "\n" + text
        facts_iri, entities_iri = self.data_graph_iris(graph)
        target = entities_iri if on_entities else facts_iri
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

    def order_key(self, entity: str) -> str:
        return terms.entity_iri(entity)  # SPARQL orders IRIs by their text, escapes included

    def run_template(
        self, name: str, graph: str, parts: Mapping[str, str], **params: Any
    ) -> list[dict[str, Any]]:
        return list(self._rows(name, graph, params, parts))

    def query(self, text: str, graph: str | None = None) -> QueryResult:
        """A user's SPARQL query; default graph = ``graph`` or the union of all graphs,
        unless the query names its own dataset with ``FROM`` (the union option would
        silently override it). Cells are the terms' lexical values."""
        try:
            if graph is not None:
                self.require_graph(graph)
                facts_iri, _ = self.data_graph_iris(graph)
                result = self._store.query(text, default_graph=ox.NamedNode(facts_iri))
            elif "FROM" in sparqltext.keywords(text):
                result = self._store.query(text)
            else:
                live = [ox.NamedNode(iri) for iri in self.live_graph_iris()]
                result = self._store.query(text, default_graph=live, named_graphs=live)
            if isinstance(result, ox.QueryBoolean):
                return QueryResult(boolean=bool(result))
            if isinstance(result, ox.QueryTriples):
                return QueryResult(("subject", "predicate", "object"),
                                   tuple((_lexical(t.subject), _lexical(t.predicate), _lexical(t.object))
                                         for t in result))
            columns = tuple(v.value for v in result.variables)
            return QueryResult(columns, tuple(tuple(_lexical(s[c]) for c in columns) for s in result))
        except SyntaxError as exc:
            raise QueryError(f"invalid SPARQL: {exc}") from exc

    # ---- a user's query as `kgengine query` runs it -------------------------------------------
    def user_dataset(self, graph: str | None, text: str) -> tuple[dict[str, list[str]], dict[str, str]]:
        """A user's query's dataset (for a worker job) and predeclared prefixes. With
        ``graph``: its facts as the default graph, its facts and labels as the named graphs
        ``facts:`` and ``labels:``. Without: the union of every graph as it is now (no
        half-written staging slot of a ``--replace``), unless the query has its own ``FROM``."""
        if graph is not None:
            facts, labels = self.data_graph_iris(graph)
            return ({"default_graphs": [facts], "named_graphs": [facts, labels]},
                    sparqltext.graph_prefixes(facts, labels))
        if "FROM" in sparqltext.keywords(text):
            return {}, sparqltext.PREFIXES
        live = self.live_graph_iris()
        return {"default_graphs": live, "named_graphs": live}, sparqltext.PREFIXES

    def check_query(self, text: str, graph: str | None = None) -> list[str]:
        prefixes = self.user_dataset(graph, "")[1]
        operation = sparqltext.update_operation(text)
        if operation is not None:
            raise QueryError(
                f"this is a SPARQL Update ({operation}); `kgengine query` runs read queries only "
                "(SELECT, ASK, CONSTRUCT, DESCRIBE). Change data with `kgengine load` / `kgengine drop`, "
                "or send updates to `kgengine serve --allow-update --token-file FILE` (docs/serve.md)"
            )
        missing = sparqltext.undefined_prefixes(text, prefixes)
        if missing:
            known = ", ".join(f"{p}:" for p in sorted(prefixes))
            raise QueryError(f"invalid SPARQL: undefined prefix '{missing[0]}:' — declare it "
                             f"(PREFIX {missing[0]}: <...>) or use a predeclared one ({known})")
        return self._missing_iris(text, prefixes)

    def _missing_iris(self, text: str, prefixes: dict[str, str]) -> list[str]:
        """Warnings for kgengine IRIs the query names that occur nowhere in the store: most
        often a relation or entity id written without percent-encoding."""
        warnings = []
        for iri in sparqltext.kgengine_iris(text, prefixes, limit=MAX_IRI_CHECKS):
            try:
                node = ox.NamedNode(iri)
            except ValueError:
                continue
            if iri.startswith(terms.GRAPH_NS):
                found = self._store.contains_named_graph(node)
            else:
                found = any(True for pattern in ((node, None, None), (None, node, None), (None, None, node))
                            for _ in islice(self._store.quads_for_pattern(*pattern), 1))
            if found:
                continue
            hint = ""
            suggestion = sparqltext.encoded_suggestion(iri)
            if suggestion is not None:
                hint = f"; ids are percent-encoded in IRIs: did you mean {suggestion}?"
            elif iri.startswith(terms.GRAPH_NS):
                hint = "; `kgengine graphs` lists the graphs"
            warnings.append(f"<{iri}> does not occur in the store{hint}")
        return warnings

    def user_query(self, text: str, graph: str | None = None, *, timeout: float | None = None,
                   rdf_syntax: str | None = None,
                   warn: Callable[[str], None] | None = None) -> QueryResult:
        """Run in a worker process (:mod:`kgengine.serve.worker`, the one ``serve`` uses) on
        what this object reads, killed on Ctrl-C or at the timeout. The query is checked
        (:meth:`check_query`) here while the worker parses and evaluates it: a refused query
        stops the worker, and the warnings come before any result."""
        if rdf_syntax is not None and rdf_syntax not in RDF_SYNTAXES:
            raise QueryError(f"unknown RDF syntax {rdf_syntax!r} (one of {', '.join(RDF_SYNTAXES)})")
        # the worker reads a snapshot: this object's, or (this object being the writer, whose
        # lock the worker cannot take) one taken for this query; it starts first, so that it
        # imports and opens the store while the job is made
        own = None
        if self._snapshot is None and not self.read_only:
            self._store.flush()
            taken = _reader_snapshot(Path(self.location))
            if taken is not None:
                own = taken[0]
                del taken
        worker = spawn([sys.executable, "-m", "kgengine.serve.worker", "--store",
                        str(own) if own is not None else self.read_path])
        try:
            dataset, prefixes = self.user_dataset(graph, text)
        except BaseException:
            stop(worker)
            _remove_snapshot_dir(own)
            raise
        job: dict[str, Any] = {
            "kind": "query", "query": text, "prefixes": prefixes, "allow_service": True,
            "max_rows": UNLIMITED, "max_bytes": UNLIMITED,
            "accept": (f"{RDF_SYNTAXES[rdf_syntax][0]}, application/sparql-results+json" if rdf_syntax
                       else "application/sparql-results+json, application/n-triples"),
            **dataset,
        }

        def check() -> None:
            for warning in self.check_query(text, graph):
                if warn is not None:
                    warn(warning)

        try:
            header, body = run_job(worker, job, timeout, meanwhile=check)
        finally:
            _remove_snapshot_dir(own)
        return _worker_answer(text, prefixes, header, body, rdf_syntax)

    def triples(self, graph: str) -> Iterator[Triple]:
        # a direct scan of the facts graph (sparql/all_triples.rq, its query twin, is 2.5x
        # slower: 3.4 s vs 1.4 s on FB15k-237), with each IRI decoded once (ids repeat)
        decoded: dict[str, Any] = {}
        facts_iri = ox.NamedNode(self.data_graph_iris(graph)[0])
        for quad in self._store.quads_for_pattern(None, None, None, facts_iri):
            triple = []
            for term in (quad.subject, quad.predicate, quad.object):
                key = term.value if isinstance(term, ox.NamedNode) else None
                value = decoded.get(key) if key is not None else None
                if value is None:
                    value = _python_value(term)
                    if key is not None:
                        decoded[key] = value
                triple.append(value)
            yield Triple(*triple)

    def close(self) -> None:
        if not hasattr(self, "_store"):
            return
        if not self.read_only:  # flush() raises on a read-only store
            self._store.flush()
        del self._store
        self._remove_snapshot()
