"""Lexical checks on SPARQL text that pyoxigraph gives no option for.

pyoxigraph exposes no algebra, so three protocol/safety needs are met on the token level:
is there a ``SERVICE`` (outbound HTTP: refused by default) or ``LOAD``; does the query carry
its own ``FROM`` dataset (then the union default graph must not override it); and adding
the protocol's ``using-graph-uri`` to each update operation. Strings, IRIs and comments are
blanked first, so a keyword inside them never counts; a false positive only ever makes the
server refuse, never run, something."""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import unquote

import pyoxigraph as ox
from kgengine import terms

# strings (long forms first), IRI references and comments, as in the SPARQL 1.1 grammar
_OPAQUE = re.compile(
    r'''
      """(?:[^"\\]|\\.|"(?!""))*"""
    | \'\'\'(?:[^'\\]|\\.|'(?!''))*\'\'\'
    | "(?:[^"\\\n\r]|\\.)*"
    | '(?:[^'\\\n\r]|\\.)*'
    | <[^<>"{}|^`\\\x00-\x20]*>
    | \#[^\n\r]*
    ''',
    re.VERBOSE | re.DOTALL,
)


@lru_cache(maxsize=8)
def blank_opaque(text: str) -> str:
    """``text`` with strings, IRIs and comments replaced by spaces (offsets unchanged);
    cached, as a query is checked several ways (0.2 s each for a 3 MB query)."""
    return _OPAQUE.sub(lambda m: " " * (m.end() - m.start()), text)


@lru_cache(maxsize=8)
def squeezed(text: str) -> str:
    """:func:`blank_opaque` with every run of whitespace cut to one space: the same tokens
    in the same order, for the checks that need no offsets. A 3 MB ``VALUES`` block of IRIs
    squeezes to a few bytes, so the regular expressions below scan nothing of it."""
    return " ".join(_OPAQUE.sub(" ", text).split())  # a constant replacement: no Python per match


# a keyword, not part of a variable (?x $x), a prefixed name (ex:word, word:x) or a longer name
_KEYWORDS = re.compile(r"(?<![^\W\d])(?<![:?$])(SERVICE|LOAD|FROM)(?![\w:])", re.IGNORECASE)
_UPDATE_TOKENS = re.compile(
    r"[{}]|(?<![^\W\d])(?<![:?$])(WHERE|USING|WITH|DELETE)(?![\w:])", re.IGNORECASE
)


def keywords(text: str) -> set[str]:
    """Which of SERVICE (outbound HTTP), LOAD (outbound HTTP, updates) and FROM (the query
    names its own dataset, so the union default graph must not override it) occur as
    keywords in ``text``, upper-cased."""
    return {m.upper() for m in _KEYWORDS.findall(squeezed(text))}


class DatasetConflict(ValueError):
    """using-graph-uri / using-named-graph-uri together with USING or WITH in the update."""


def add_using(update: str, using: list[str], using_named: list[str]) -> str:
    """Apply the protocol's ``using-graph-uri`` / ``using-named-graph-uri`` to every
    ``DELETE/INSERT ... WHERE`` operation by inserting ``USING`` clauses before its
    top-level ``WHERE`` (SPARQL 1.1 Protocol §2.2.3). ``DELETE WHERE`` shorthand operations
    take no ``USING`` clause and are left as they are."""
    if not using and not using_named:
        return update
    clause = " ".join(
        [f"USING {ox.NamedNode(iri)}" for iri in using]
        + [f"USING NAMED {ox.NamedNode(iri)}" for iri in using_named]
    )
    masked = blank_opaque(update)
    depth = 0
    previous = ""
    inserts: list[int] = []
    for match in _UPDATE_TOKENS.finditer(masked):
        token = match.group().upper()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
        elif depth == 0:
            if token in ("USING", "WITH"):
                raise DatasetConflict(
                    "the update has its own USING/WITH clause and the request also gives "
                    "using-graph-uri/using-named-graph-uri (SPARQL 1.1 Protocol forbids both)"
                )
            if token == "WHERE" and previous != "DELETE":
                inserts.append(match.start())
        previous = token
    for offset in reversed(inserts):
        update = f"{update[:offset]}{clause} {update[offset:]}"
    return update


# ---- help for hand-written queries (`kgengine query`, `kgengine serve`) ---------------------
RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS_NS = "http://www.w3.org/2000/01/rdf-schema#"
XSD_NS = "http://www.w3.org/2001/XMLSchema#"

# predeclared in every query; a query's own PREFIX of the same name wins (docs/serve.md)
PREFIXES: dict[str, str] = {
    "rdf": RDF_NS,
    "rdfs": RDFS_NS,
    "xsd": XSD_NS,
    "e": terms.ENTITY_NS,  # entities: e:Q42; FB15k-237 /m/0jbk is e:%2Fm%2F0jbk
    "r": terms.RELATION_NS,  # relations: r:brother, r:%2Ffilm%2Ffilm%2Fgenre
    "g": terms.GRAPH_NS,  # graph names: GRAPH g:family { ... }
    "kg": terms.VOCAB_NS,  # kgengine's own terms: kg:privateId, kg:triples, ...
}


def graph_prefixes(facts_iri: str, labels_iri: str) -> dict[str, str]:
    """The predeclared prefixes plus ``facts:`` and ``labels:`` naming one graph's named
    graphs now (they move with each ``--replace``) for queries on that graph:
    ``GRAPH labels: { ?e rdfs:label ?l }``."""
    return {**PREFIXES, "facts": facts_iri, "labels": labels_iri}


_FIRST_SELECT = re.compile(r"(?<![\w?$:])SELECT\s+(?:(?:DISTINCT|REDUCED)\s+)?(\*)?", re.IGNORECASE)
_VARIABLE = re.compile(r"[?$]([A-Za-z0-9_\u00b7\u00c0-\uffff]+)")


def star_columns(text: str, columns: list[str]) -> list[str]:
    """``columns`` in the order a ``SELECT *`` query mentions them (pyoxigraph sorts them);
    any other query's columns as they are (its projection's order)."""
    masked = squeezed(text)
    select = _FIRST_SELECT.search(masked)
    if select is None or select.group(1) is None:
        return columns
    seen: list[str] = []
    for name in _VARIABLE.findall(masked, select.end()):
        if name in columns and name not in seen:
            seen.append(name)
    return seen + [c for c in columns if c not in seen]


_PROLOGUE = re.compile(r"\s*(?:BASE\s*|PREFIX\s+[^\s:]*:\s*)*", re.IGNORECASE)
_FIRST_WORD = re.compile(r"[A-Za-z]+")
UPDATE_WORDS = frozenset(
    {"INSERT", "DELETE", "LOAD", "CLEAR", "CREATE", "DROP", "COPY", "MOVE", "ADD", "WITH"}
)


def update_operation(text: str) -> str | None:
    """The first keyword of ``text`` when it is a SPARQL Update (``INSERT``, ``DELETE``,
    ...), else None."""
    masked = squeezed(text)
    start = _PROLOGUE.match(masked)
    word = _FIRST_WORD.match(masked, start.end() if start else 0)
    found = word.group().upper() if word else ""
    return found if found in UPDATE_WORDS else None


_DECLARED = re.compile(r"(?<![\w?$:])PREFIX\s+([^\s:]*):", re.IGNORECASE)
# a prefixed name's prefix: after blanking, a colon only occurs in prefixed names
_USED = re.compile(r"(?<![\w?$.\-:\\%])([A-Za-z][\w.\-]*)?:")


def undefined_prefixes(text: str, predeclared: dict[str, str]) -> list[str]:
    """Prefixes the query uses but neither declares nor finds predeclared, in order."""
    masked = squeezed(text)
    declared = set(_DECLARED.findall(masked)) | set(predeclared)
    out: list[str] = []
    for match in _USED.finditer(masked):
        name = match.group(1) or ""
        if name not in declared and name not in out:
            out.append(name)
    return out


_ERROR_AT = re.compile(r"^error at (\d+):(\d+): (.*)$", re.DOTALL)


def short_syntax_error(message: str, text: str, predeclared: dict[str, str]) -> str:
    """pyoxigraph's parser message in one line: an undefined prefix named, with a hint; a
    screen-long "expected one of" list cut to its position, with the line and a caret."""
    missing = undefined_prefixes(text, predeclared)
    if "Prefix not found" in message and missing:
        known = ", ".join(f"{p}:" for p in sorted(predeclared))
        where = _ERROR_AT.match(message)
        at = f"error at {where.group(1)}:{where.group(2)}: " if where else ""
        return (f"{at}undefined prefix '{missing[0]}:' — declare it (PREFIX {missing[0]}: <...>) "
                f"or use a predeclared one ({known})")
    flat = " ".join(message.split())
    if len(flat) <= 160:
        return flat
    where = _ERROR_AT.match(message)
    if where is None:
        return flat[:157] + "..."
    line_no, column = int(where.group(1)), int(where.group(2))
    lines = text.splitlines() or [""]
    line = lines[min(line_no, len(lines)) - 1]
    start = max(0, column - 40)
    excerpt = line[start:column + 20].replace("\t", " ")
    return f"error at {line_no}:{column}: unexpected input here: {excerpt!r} (column {column})"


_LOCAL = re.compile(r"((?:[\w.\-:%]|\\.)*)")


# the text before an IRI reference that makes it the IRI of a ``PREFIX p:`` declaration
_DECLARATION_TAIL = re.compile(r"(?<![\w?$:])PREFIX\s+[^\s:]*:\s*$", re.IGNORECASE)
_PREFIX_IRI = re.compile(r"PREFIX\s+([^\s:]*):\s*<([^>]*)>", re.IGNORECASE)


def kgengine_iris(text: str, prefixes: dict[str, str], limit: int | None = None) -> list[str]:
    """IRIs in kgengine's entity, relation and graph namespaces that ``text`` names, as
    ``<...>`` or as prefixed names (the query's own PREFIXes and ``prefixes``), in order;
    the first ``limit`` distinct ones when given (a 100k-IRI ``VALUES`` block stops early).

    Linear in the text, one pass over its tokens: whether an IRI reference is a ``PREFIX``
    declaration's is read from the few characters between it and the token before it
    (measured: the old look-behind over everything before each IRI made a 3 MB query take
    60 s), and prefixed names are found in the :func:`squeezed` text."""
    declared = dict(prefixes)
    for match in _PREFIX_IRI.finditer(text):
        declared[match.group(1)] = match.group(2)
    namespaces = (terms.ENTITY_NS, terms.RELATION_NS, terms.GRAPH_NS)
    construct = "CONSTRUCT" in text.upper()  # a CONSTRUCT template makes new triples: skipped
    template = _construct_template(blank_opaque(text)) if construct else range(0)
    found: dict[str, None] = {}

    def add(iri: str) -> bool:
        if iri not in namespaces:
            found[iri] = None
        return limit is not None and len(found) >= limit

    previous_end = 0
    for match in _OPAQUE.finditer(text):
        start, token = match.start(), match.group()
        gap = text[previous_end:start]
        previous_end = match.end()
        if start in template or not (token.startswith("<") and token[1:-1].startswith(namespaces)):
            continue
        if _DECLARATION_TAIL.search(gap) is None and add(token[1:-1]):
            return list(found)
    flat = squeezed(text)
    template = _construct_template(flat) if construct else range(0)
    for match in _USED.finditer(flat):
        namespace = declared.get(match.group(1) or "")
        if match.start() in template or namespace is None or not namespace.startswith(namespaces):
            continue
        name = _LOCAL.match(flat, match.end())
        assert name is not None  # the pattern matches the empty string too
        local = name.group(1).rstrip(".")
        if add(namespace + re.sub(r"\\(.)", r"\1", local)):
            break
    return list(found)


def _construct_template(masked: str) -> range:
    """Offsets of the template of a ``CONSTRUCT { ... } WHERE`` query (empty otherwise)."""
    if "CONSTRUCT" not in masked.upper():  # one C-level pass before the regular expression
        return range(0)
    match = re.search(r"(?<![\w?$:])CONSTRUCT\s*\{", masked, re.IGNORECASE)
    if match is None:
        return range(0)
    depth = 0
    for offset in range(match.end() - 1, len(masked)):
        if masked[offset] == "{":
            depth += 1
        elif masked[offset] == "}":
            depth -= 1
            if depth == 0:
                return range(match.end(), offset)
    return range(0)


def encoded_suggestion(iri: str) -> str | None:
    """The properly percent-encoded form of an entity or relation IRI written with raw
    characters (``r//film/film/genre`` -> ``r:%2Ffilm%2Ffilm%2Fgenre``), as a prefixed
    name; None when the IRI is encoded already."""
    for prefix, namespace in (("e", terms.ENTITY_NS), ("r", terms.RELATION_NS)):
        if iri.startswith(namespace):
            local = iri[len(namespace):]
            encoded = terms.encode_id(unquote(local))
            return None if encoded == local else f"{prefix}:{encoded}"
    return None
