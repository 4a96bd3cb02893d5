"""A user's SPARQL query run in a worker process, as ``kgengine query`` runs it.

pyoxigraph evaluates a query in Rust with no cancellation hook, so the query runs in a
:mod:`kgengine.serve.worker` process (the one ``kgengine serve`` uses), killed on Ctrl-C or
at the timeout; its answer (SPARQL JSON results, or N-Triples / Turtle) comes back as a
:class:`~kgengine.model.QueryResult` with the cells ``query`` gives in-process."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pyoxigraph as ox
from kgengine import sparqltext
from kgengine.errors import KGEngineError, QueryError
from kgengine.model import QueryResult
from kgengine.oxigraph.values import lexical
from kgengine.processes import run_job, spawn, stop

UNLIMITED = 2**62  # the worker's row and byte caps: a local query returns everything
RDF_SYNTAXES = {"nt": ("application/n-triples", "N-Triples"), "ttl": ("text/turtle", "Turtle")}
# a user query's dataset for the worker ("default_graphs", "named_graphs": IRIs), and the
# prefixes it may use undeclared
Dataset = dict[str, list[str]]


def run_user_query(store: str, text: str, dataset: Callable[[], tuple[Dataset, dict[str, str]]], *,
                   timeout: float | None, rdf_syntax: str | None,
                   meanwhile: Callable[[], object]) -> QueryResult:
    """Run ``text`` in a worker reading the store directory ``store`` (a snapshot no one
    writes to). The worker starts first, so that it imports and opens the store while
    ``dataset()`` makes the job; ``meanwhile()`` runs while the worker works (what it raises
    stops the worker)."""
    worker = spawn([sys.executable, "-m", "kgengine.serve.worker", "--store", store])
    try:
        graphs, prefixes = dataset()
    except BaseException:
        stop(worker)
        raise
    job: dict[str, Any] = {
        "kind": "query", "query": text, "prefixes": prefixes, "allow_service": True,
        "max_rows": UNLIMITED, "max_bytes": UNLIMITED,
        "accept": (f"{RDF_SYNTAXES[rdf_syntax][0]}, application/sparql-results+json" if rdf_syntax
                   else "application/sparql-results+json, application/n-triples"),
        **graphs,
    }
    header, body = run_job(worker, job, timeout, meanwhile=meanwhile)
    return worker_answer(text, prefixes, header, body, rdf_syntax)


def worker_answer(text: str, prefixes: dict[str, str], header: dict[str, Any], body: bytes,
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
        triples = tuple((lexical(t.subject), lexical(t.predicate), lexical(t.object))
                        for t in ox.parse(body, format=ox.RdfFormat.N_TRIPLES))
        return QueryResult(("subject", "predicate", "object"), triples)
    document = json.loads(body)
    if "boolean" in document:
        return QueryResult(boolean=bool(document["boolean"]))
    columns = sparqltext.star_columns(text, list(document["head"]["vars"]))
    rows = tuple(tuple(_json_cell(binding.get(c)) for c in columns)
                 for binding in document["results"]["bindings"])
    return QueryResult(tuple(columns), rows)


def _json_cell(term: dict[str, Any] | None) -> str | None:
    """A SPARQL JSON term's lexical value, as ``query`` gives it in-process (``values.lexical``)."""
    if term is None:
        return None
    if term.get("type") == "triple":  # RDF-star: << s p o >>
        parts = term["value"]
        inner = " ".join(_json_cell(parts[k]) or "" for k in ("subject", "predicate", "object"))
        return f"<< {inner} >>"
    return term.get("value")
