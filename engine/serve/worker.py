"""A query worker process: ``python -m kgengine.serve.worker --store DIR [--writable]``.

Why processes: pyoxigraph evaluates a query in Rust with no cancellation hook. A thread
running it cannot be stopped (measured: it keeps a core busy after its caller gave up), so
the server runs queries here and kills the process when the timeout passes.

Protocol on stdin/stdout, one job at a time: the server writes a frame (4-byte big-endian
length + JSON job); the worker answers with a frame holding a JSON header (status, content
type, ``length`` of the body, truncation) followed by ``length`` body bytes. The first frame
the worker writes, unasked, says whether it could open the store."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pyoxigraph as ox
from kgengine import sparqltext
from kgengine.errors import GraphNotFoundError
from kgengine.oxigraph.layout import require_store_directory
from kgengine.oxigraph.store import OxigraphStore
from kgengine.processes import read_frame as read_job
from kgengine.processes import write_frame
from kgengine.serve import formats
from kgengine.store import graph_not_found

__all__ = ["handle", "main", "read_job", "write_frame"]


def open_oxigraph(path: str, writable: bool) -> ox.Store:
    """Read-only workers open the server's private snapshot (:mod:`.snapshot`), which no
    one writes to; the one writable worker (--allow-update) owns the live store."""
    if writable:
        return ox.Store(path)
    require_store_directory(Path(path))
    return ox.Store.read_only(path)


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _graphs(names: list[str] | None) -> list[ox.NamedNode]:
    return [ox.NamedNode(iri) for iri in names or []]


def run_query(store: ox.Store, job: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    text: str = job["query"]
    found = sparqltext.keywords(text)
    if not job.get("allow_service") and "SERVICE" in found:
        raise Refused(403, "SERVICE (federated query) is disabled on this endpoint; "
                           "the server must be started with --allow-service")
    options: dict[str, Any] = {"base_iri": job.get("base"), "prefixes": job.get("prefixes")}
    default, named = job.get("default_graphs"), job.get("named_graphs")
    if default is None and named is None:
        # like `kgengine query`: the default graph is the union of all graphs, unless the
        # query names its own dataset (the union option would silently override FROM)
        if "FROM" not in found:
            options["use_default_graph_as_union"] = True
    else:  # SPARQL Protocol §2.1.4: the protocol dataset replaces the query's
        options["default_graph"] = _graphs(default)
        options["named_graphs"] = _graphs(named)
    accept = job.get("accept")
    max_rows, max_bytes = job["max_rows"], job["max_bytes"]
    result = store.query(text, **options)
    if isinstance(result, ox.QueryBoolean):
        offer = formats.negotiate(accept, formats.BOOLEAN_OFFERS)
        body = formats.serialize_boolean(offer.fmt, bool(result))
    else:
        solutions = isinstance(result, ox.QuerySolutions)
        offer = formats.negotiate(accept, formats.SOLUTION_OFFERS if solutions else formats.GRAPH_OFFERS)
        fast = None
        if offer.fmt in formats.FAST_FORMATS:
            fast = formats.serialize_fast(result, offer.fmt, max_rows, max_bytes)
            if fast is None:  # a cap is in reach: evaluate again and cut exactly
                result = store.query(text, **options)
        if fast is not None:
            body = fast
        elif isinstance(result, ox.QuerySolutions):
            variables = [v.value for v in result.variables]
            body = formats.serialize_solutions(offer.fmt, variables, result, max_rows, max_bytes)
        elif isinstance(result, ox.QueryTriples):
            body = formats.serialize_triples(offer.fmt, result, max_rows, max_bytes)
        else:  # the same query evaluated again gives the same kind of result
            raise TypeError(f"a query answered with {type(result).__name__} the second time")
    return {"status": 200, "type": offer.content_type, "truncated": body.truncated}, body.data


def run_update(store: ox.Store, job: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    text: str = job["update"]
    if not job.get("allow_service") and "LOAD" in sparqltext.keywords(text):
        raise Refused(403, "LOAD (fetching a remote document) is disabled on this endpoint; "
                           "the server must be started with --allow-service")
    text = sparqltext.add_using(text, job.get("using_graphs") or [], job.get("using_named_graphs") or [])
    store.update(text, base_iri=job.get("base"), prefixes=job.get("prefixes"))
    store.flush()
    return {"status": 204}, b""


def run_graphs(store: ox.Store) -> tuple[dict[str, Any], bytes]:
    names = sorted(g.value for g in store.named_graphs() if isinstance(g, ox.NamedNode))
    return {"status": 200, "type": "application/json"}, json.dumps(names).encode()


def run_graph_iris(store: ox.Store, name: str) -> tuple[dict[str, Any], bytes]:
    """The named graphs (facts, labels) that hold kgengine graph ``name`` now (the store
    says which slot is live) and whether the graph is complete (not marked 'loading'), or 404."""
    kg = OxigraphStore.wrap(store, "this store")
    try:
        info = kg.require_graph(name)
    except GraphNotFoundError:
        raise Refused(404, str(graph_not_found(name, "this store", (g.name for g in kg.graphs())))) from None
    iris = kg.data_graph_iris(name)
    header = {"status": 200, "type": "application/json", "complete": info.complete}
    return header, json.dumps(list(iris)).encode()


def handle(store: ox.Store, job: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    try:
        kind = job["kind"]
        if kind == "query":
            return run_query(store, job)
        if kind == "update":
            return run_update(store, job)
        if kind == "graphs":
            return run_graphs(store)
        if kind == "graph_iris":
            return run_graph_iris(store, job["graph"])
        raise ValueError(f"unknown job kind {kind!r}")
    except Refused as exc:
        return {"status": exc.status, "error": str(exc)}, b""
    except (SyntaxError, ValueError) as exc:
        # the parser's message (with line:column) is what the client needs to fix the query;
        # ValueError covers invalid IRIs in the protocol parameters and conflicting datasets
        return {"status": 400, "error": str(exc)}, b""
    except OSError as exc:
        # pyoxigraph raises OSError both for store failures and for evaluation errors it
        # meets while streaming (a SERVICE call failing); neither is the client's syntax
        # error, but the message helps and holds no server internals beyond the store path
        traceback.print_exc(file=sys.stderr)
        return {"status": 500, "error": f"query evaluation failed: {exc}"}, b""
    except Exception:  # never let one bad job take the worker down; log, answer 500
        traceback.print_exc(file=sys.stderr)
        return {"status": 500, "error": "internal error while evaluating the request"}, b""


def _exit_with_parent() -> None:
    """Die when the server dies, even mid-query (a runaway query never reads stdin again)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True)
    parser.add_argument("--writable", action="store_true")
    args = parser.parse_args(argv)
    # keep the protocol channel private: anything printed (by us or a library) goes to stderr
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    inp = sys.stdin.buffer
    _exit_with_parent()
    try:
        try:
            store = open_oxigraph(args.store, args.writable)
        except OSError as exc:
            write_frame(out, {"status": 0, "error": f"cannot open the store at {args.store}: {exc}"})
            return
        write_frame(out, {"status": 0, "pid": os.getpid()})
        while (job := read_job(inp)) is not None:
            header, body = handle(store, job)
            write_frame(out, header, body)
    except BrokenPipeError:  # the server went away (or gave up on this worker): just exit
        os._exit(0)  # not sys.exit: flushing the dead pipe at exit would complain again


if __name__ == "__main__":
    main()
