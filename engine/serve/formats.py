"""Content negotiation and capped result serialisation.

Two paths. The fast one lets pyoxigraph's Rust serialiser write the whole result into a
:class:`CappedSink`, which counts bytes and (from a per-format row marker) an upper bound of
the rows as the data streams by, and aborts as soon as a cap may be passed. Most results fit,
and then Python never touches a row (per-row Python costs several times the query itself on
lookups: measured). When a cap is hit, the caller runs the query again through the exact
path here: rows are written in Python (checked against pyoxigraph's own output in the tests)
and cut at the last row that fits. A cut document is still valid; the caller reports the cut
in a header, and it is also said in-band where a format has room: JSON and XML results in
``head/link`` (``urn:kgengine:truncated:max-rows=N``), Turtle and N-Triples in a trailing
comment. CONSTRUCT triples in the pretty formats are cut, then serialised by pyoxigraph."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyoxigraph as ox

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"


@dataclass(frozen=True)
class Offer:
    media_type: str  # what the client may ask for
    fmt: str  # serialiser key
    content_type: str  # what the response says


def _offers(*rows: tuple[str, str, str]) -> tuple[Offer, ...]:
    return tuple(Offer(*row) for row in rows)


# server preference order: the first offer is the default
SOLUTION_OFFERS = _offers(
    ("application/sparql-results+json", "json", "application/sparql-results+json"),
    ("application/sparql-results+xml", "xml", "application/sparql-results+xml"),
    ("text/csv", "csv", "text/csv; charset=utf-8"),
    ("text/tab-separated-values", "tsv", "text/tab-separated-values; charset=utf-8"),
    ("application/json", "json", "application/json"),
    ("application/xml", "xml", "application/xml"),
    ("text/xml", "xml", "text/xml"),
)
# CSV and TSV have no boolean form: an ASK asked for as CSV gets JSON (clients such as rdflib
# pick their parser from the response's Content-Type, so they still read it right)
BOOLEAN_OFFERS = tuple(o for o in SOLUTION_OFFERS if o.fmt in ("json", "xml"))
GRAPH_OFFERS = _offers(
    ("text/turtle", "turtle", "text/turtle; charset=utf-8"),
    ("application/n-triples", "ntriples", "application/n-triples"),
    ("application/rdf+xml", "rdfxml", "application/rdf+xml"),
    ("application/ld+json", "jsonld", "application/ld+json"),
    ("application/x-turtle", "turtle", "text/turtle; charset=utf-8"),
    ("text/plain", "ntriples", "text/plain; charset=utf-8"),
)
RDF_FORMATS = {
    "turtle": ox.RdfFormat.TURTLE,
    "ntriples": ox.RdfFormat.N_TRIPLES,
    "rdfxml": ox.RdfFormat.RDF_XML,
    "jsonld": ox.RdfFormat.JSON_LD,
}


def parse_accept(header: str) -> list[tuple[str, float, int]]:
    """``(media range, q, position)`` for each range of an Accept header; unparsable
    q-values count as 1 and ranges with q=0 are dropped (they exclude, nothing else)."""
    ranges = []
    for position, part in enumerate(header.split(",")):
        fields = part.split(";")
        media = fields[0].strip().lower()
        if "/" not in media:
            continue
        q = 1.0
        for param in fields[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = min(max(float(value.strip()), 0.0), 1.0)
                except ValueError:
                    q = 1.0
        if q > 0:
            ranges.append((media, q, position))
    return ranges


def _match(media_range: str, media_type: str) -> int:
    """Specificity of the match of ``media_range`` to ``media_type`` (-1: no match)."""
    if media_range == media_type:
        return 2
    kind, _, sub = media_range.partition("/")
    if sub == "*" and (kind == "*" or media_type.startswith(kind + "/")):
        return 0 if kind == "*" else 1
    return -1


@functools.lru_cache(maxsize=512)  # clients send the same few Accept headers over and over
def negotiate(accept: str | None, offers: tuple[Offer, ...]) -> Offer:
    """The offer the Accept header prefers: highest q, then most specific match, then the
    client's order, then ours. An absent header or one that matches nothing gets our default
    (RFC 9110 lets a server ignore Accept rather than answer 406, which clients that send a
    results type for a CONSTRUCT handle better)."""
    if not accept:
        return offers[0]
    ranges = parse_accept(accept)
    best: tuple[float, int, int, int] | None = None
    chosen = offers[0]
    for rank, offer in enumerate(offers):
        for media_range, q, position in ranges:
            specificity = _match(media_range, offer.media_type)
            if specificity < 0:
                continue
            key = (q, specificity, -position, -rank)
            if best is None or key > best:
                best, chosen = key, offer
    return chosen


def prefers_html(accept: str | None) -> bool:
    """True when the client (a browser) ranks text/html at least as high as every SPARQL
    or RDF type we serve; a bare ``*/*`` does not count as asking for HTML."""
    ranges = parse_accept(accept or "")
    html = max((q for r, q, _ in ranges if _match(r, "text/html") > 0), default=0.0)
    ours = max(
        (q for r, q, _ in ranges for o in SOLUTION_OFFERS + GRAPH_OFFERS if _match(r, o.media_type) > 0),
        default=0.0,
    )
    return html > 0 and html >= ours


# ---- terms ------------------------------------------------------------------------------
def _json_term(term: Any) -> dict[str, Any]:
    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.Literal):
        out: dict[str, Any] = {"type": "literal", "value": term.value}
        if term.language:
            out["xml:lang"] = term.language
            if term.direction is not None:
                out["its:dir"] = str(term.direction)
        elif term.datatype.value != XSD_STRING:
            out["datatype"] = term.datatype.value
        return out
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, ox.Triple):
        return {
            "type": "triple",
            "value": {
                "subject": _json_term(term.subject),
                "predicate": _json_term(term.predicate),
                "object": _json_term(term.object),
            },
        }
    raise TypeError(f"not an RDF term: {term!r}")


# XML 1.0 cannot carry these even as character references; such rare literals are shown
# with U+FFFD rather than making the whole document unparsable
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(value: str) -> str:
    """Escaped for text and attribute values alike (as pyoxigraph does)."""
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return _XML_INVALID.sub("\ufffd", value)


_xml_attr = _xml_text


def _xml_term(term: Any) -> str:
    if isinstance(term, ox.NamedNode):
        return f"<uri>{_xml_text(term.value)}</uri>"
    if isinstance(term, ox.Literal):
        if term.language:
            attrs = f' xml:lang="{_xml_attr(term.language)}"'
            if term.direction is not None:
                attrs += (
                    f' its:dir="{term.direction}" xmlns:its="http://www.w3.org/2005/11/its"'
                    ' its:version="2.0"'
                )
        elif term.datatype.value != XSD_STRING:
            attrs = f' datatype="{_xml_attr(term.datatype.value)}"'
        else:
            attrs = ""
        return f"<literal{attrs}>{_xml_text(term.value)}</literal>"
    if isinstance(term, ox.BlankNode):
        return f"<bnode>{_xml_text(term.value)}</bnode>"
    if isinstance(term, ox.Triple):
        return (
            f"<triple><subject>{_xml_term(term.subject)}</subject>"
            f"<predicate>{_xml_term(term.predicate)}</predicate>"
            f"<object>{_xml_term(term.object)}</object></triple>"
        )
    raise TypeError(f"not an RDF term: {term!r}")


def _csv_value(term: Any) -> str:
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    if isinstance(term, ox.Triple):
        return " ".join(_csv_value(t) for t in (term.subject, term.predicate, term.object))
    return term.value


def _csv_field(term: Any) -> str:
    if term is None:
        return ""
    value = _csv_value(term)
    if any(c in value for c in '",\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


# Turtle's bare forms, which the TSV format prefers and pyoxigraph's TSV writer uses too
_BARE = {
    XSD + "integer": re.compile(r"[+-]?[0-9]+"),
    XSD + "decimal": re.compile(r"[+-]?[0-9]*\.[0-9]+"),
    XSD + "boolean": re.compile(r"true|false"),
}


def _tsv_term(term: Any) -> str:
    # pyoxigraph's str() of a term is its N-Triples form, with tab and newline escaped as
    # TSV requires; triple terms take the SPARQL 1.2 <<( )>> spelling
    if isinstance(term, ox.Triple):
        return f"<<( {_tsv_term(term.subject)} {_tsv_term(term.predicate)} {_tsv_term(term.object)} )>>"
    if isinstance(term, ox.Literal) and not term.language:
        bare = _BARE.get(term.datatype.value)
        if bare is not None and bare.fullmatch(term.value):
            return term.value
    return str(term)


# ---- fast path --------------------------------------------------------------------------
# fmt -> (pyoxigraph format, row marker, offset): rows <= count(marker) + offset. The markers
# occur once per row (TSV/N-Triples escape newlines; XML escapes "<"); where they can also
# occur inside a value (JSON "},{", CSV CRLF) they only over-count, which is safe.
FAST_FORMATS: dict[str, tuple[Any, bytes, int]] = {
    "json": (ox.QueryResultsFormat.JSON, b"},{", 1),
    "xml": (ox.QueryResultsFormat.XML, b"<result>", 0),
    "csv": (ox.QueryResultsFormat.CSV, b"\r\n", -1),
    "tsv": (ox.QueryResultsFormat.TSV, b"\n", -1),
    "ntriples": (ox.RdfFormat.N_TRIPLES, b"\n", 0),
}


class CapExceeded(Exception):
    """Raised inside the Rust serialiser's writes to stop it once a cap may be passed."""


class CappedSink:
    """A binary file-like target for ``QuerySolutions.serialize`` with the two caps."""

    def __init__(self, fmt: str, max_rows: int, max_bytes: int) -> None:
        _, self.marker, self.offset = FAST_FORMATS[fmt]
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.parts: list[bytes] = []
        self.size = 0
        self.marks = 0
        self._tail = b""  # a marker may straddle two writes

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise CapExceeded("bytes")
        window = self._tail + chunk
        self.marks += window.count(self.marker)
        self._tail = window[-(len(self.marker) - 1):] if len(self.marker) > 1 else b""
        if self.marks + self.offset > self.max_rows:
            raise CapExceeded("rows")
        self.parts.append(chunk)
        return len(chunk)

    def flush(self) -> None:
        pass


def serialize_fast(result: Any, fmt: str, max_rows: int, max_bytes: int) -> Body | None:
    """The whole result serialised by pyoxigraph, or None when it may pass a cap (the
    result is then consumed: run the query again and use the exact path)."""
    sink = CappedSink(fmt, max_rows, max_bytes)
    try:
        result.serialize(sink, format=FAST_FORMATS[fmt][0])
    except CapExceeded:
        return None
    return Body(b"".join(sink.parts), max(sink.marks + sink.offset, 0))


# ---- documents --------------------------------------------------------------------------
@dataclass
class Body:
    data: bytes
    rows: int
    truncated: str | None = None  # "rows" or "bytes": which cap cut the result


def _capped(
    head: str,
    rows: Iterator[str],
    tail: str,
    max_rows: int,
    max_bytes: int,
    marked: Callable[[str], tuple[str, str]] | None = None,
) -> Body:
    """Join ``head``, the row chunks and ``tail``, stopping before the row that would pass a
    cap; ``marked(reason)`` gives the head and tail of a cut document, which carry the in-band
    marker (rows are then dropped from the end until the marked document fits too)."""
    parts = [head]
    sizes: list[int] = []
    size = len(head.encode()) + len(tail.encode())
    truncated: str | None = None
    for chunk in rows:
        if len(sizes) >= max_rows:
            truncated = "rows"
            break
        chunk_size = len(chunk.encode())
        if size + chunk_size > max_bytes:
            truncated = "bytes"
            break
        parts.append(chunk)
        sizes.append(chunk_size)
        size += chunk_size
    if truncated and marked:
        head, tail = marked(truncated)
        parts[0] = head
        size = len(head.encode()) + len(tail.encode()) + sum(sizes)
        while size > max_bytes and sizes:
            parts.pop()
            size -= sizes.pop()
    parts.append(tail)
    return Body("".join(parts).encode(), len(sizes), truncated)


def cap_text(reason: str, max_rows: int, max_bytes: int) -> str:
    """``max-rows=N`` or ``max-bytes=N``: the cap that cut a result (also the header value)."""
    return f"max-rows={max_rows}" if reason == "rows" else f"max-bytes={max_bytes}"


def _marker_iri(reason: str, max_rows: int, max_bytes: int) -> str:
    # the results formats' own slot for metadata about the results: head/link
    return f"urn:kgengine:truncated:{cap_text(reason, max_rows, max_bytes)}"


def serialize_solutions(
    fmt: str,
    variables: Sequence[str],
    solutions: Iterable[Any],
    max_rows: int,
    max_bytes: int,
) -> Body:
    """SPARQL 1.1 results (JSON, XML, CSV, TSV) for ``solutions`` (pyoxigraph QuerySolution
    or any sequence of terms / None in ``variables`` order)."""
    if fmt == "json":
        def json_head(link: list[str] | None) -> str:
            head: dict[str, Any] = {"vars": list(variables)}
            if link:
                head["link"] = link
            return json.dumps({"head": head}, separators=(",", ":"))[:-1] + ',"results":{"bindings":['

        def json_rows() -> Iterator[str]:
            sep = ""
            for solution in solutions:
                pairs = zip(variables, solution, strict=True)
                binding = {v: _json_term(t) for v, t in pairs if t is not None}
                yield sep + json.dumps(binding, separators=(",", ":"), ensure_ascii=False)
                sep = ","

        def json_marked(reason: str) -> tuple[str, str]:
            return json_head([_marker_iri(reason, max_rows, max_bytes)]), "]}}"

        return _capped(json_head(None), json_rows(), "]}}", max_rows, max_bytes, json_marked)
    if fmt == "xml":
        def xml_head(link: str) -> str:
            return (
                '<?xml version="1.0"?><sparql xmlns="http://www.w3.org/2005/sparql-results#"><head>'
                + "".join(f'<variable name="{_xml_attr(v)}"/>' for v in variables)
                + link + "</head><results>"
            )

        def xml_rows() -> Iterator[str]:
            for solution in solutions:
                yield "<result>" + "".join(
                    f'<binding name="{_xml_attr(v)}">{_xml_term(t)}</binding>'
                    for v, t in zip(variables, solution, strict=True)
                    if t is not None
                ) + "</result>"

        def xml_marked(reason: str) -> tuple[str, str]:
            link = f'<link href="{_xml_attr(_marker_iri(reason, max_rows, max_bytes))}"/>'
            return xml_head(link), "</results></sparql>"

        return _capped(xml_head(""), xml_rows(), "</results></sparql>", max_rows, max_bytes, xml_marked)
    if fmt == "csv":
        def csv_rows() -> Iterator[str]:
            for solution in solutions:
                yield ",".join(_csv_field(t) for t in solution) + "\r\n"

        head = ",".join(_csv_field(ox.Literal(v)) for v in variables) + "\r\n"
        return _capped(head, csv_rows(), "", max_rows, max_bytes)
    if fmt == "tsv":
        def tsv_rows() -> Iterator[str]:
            for solution in solutions:
                yield "\t".join("" if t is None else _tsv_term(t) for t in solution) + "\n"

        head = "\t".join(f"?{v}" for v in variables) + "\n"
        return _capped(head, tsv_rows(), "", max_rows, max_bytes)
    raise ValueError(f"unknown results format {fmt!r}")


def serialize_boolean(fmt: str, value: bool) -> Body:
    text = "true" if value else "false"
    if fmt == "json":
        data = f'{{"head":{{}},"boolean":{text}}}'
    elif fmt == "xml":
        data = (
            '<?xml version="1.0"?><sparql xmlns="http://www.w3.org/2005/sparql-results#">'
            f"<head></head><boolean>{text}</boolean></sparql>"
        )
    else:
        raise ValueError(f"no boolean form in {fmt!r}")
    return Body(data.encode(), 1)


def _serialized(triples: list[ox.Triple], rdf_format: ox.RdfFormat) -> bytes:
    data = ox.serialize(triples, format=rdf_format)
    assert data is not None  # given no output, pyoxigraph returns the bytes
    return data


def serialize_triples(fmt: str, triples: Iterable[ox.Triple], max_rows: int, max_bytes: int) -> Body:
    """CONSTRUCT/DESCRIBE results: at most ``max_rows`` triples and ``max_bytes`` bytes."""

    def comment(reason: str) -> str:
        return f"# truncated by the server: {cap_text(reason, max_rows, max_bytes)}\n"

    if fmt == "ntriples":
        lines = (f"{t} .\n" for t in triples)
        return _capped("", lines, "", max_rows, max_bytes, lambda reason: ("", comment(reason)))
    kept: list[ox.Triple] = []
    truncated: str | None = None
    for triple in triples:
        if len(kept) >= max_rows:
            truncated = "rows"
            break
        kept.append(triple)
    rdf_format = RDF_FORMATS[fmt]
    data = _serialized(kept, rdf_format)
    # the pretty formats cannot be cut line by line: shrink the triple list until it fits
    while len(data) > max_bytes and kept:
        keep = min(len(kept) - 1, int(len(kept) * max_bytes / len(data) * 0.9))
        kept = kept[: max(keep, 0)]
        truncated = "bytes"
        data = _serialized(kept, rdf_format)
    if truncated and fmt == "turtle":
        data += comment(truncated).encode()
    return Body(data, len(kept), truncated)
