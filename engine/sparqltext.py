"""Lexical checks on SPARQL text that pyoxigraph gives no option for.

pyoxigraph exposes no algebra, so three protocol/safety needs are met on the token level:
is there a ``SERVICE`` (outbound HTTP: refused by default) or ``LOAD``; does the query carry
its own ``FROM`` dataset (then the union default graph must not override it); and adding
the protocol's ``using-graph-uri`` to each update operation. Strings, IRIs and comments are
blanked first, so a keyword inside them never counts; a false positive only ever makes the
server refuse, never run, something."""

from __future__ import annotations

import re

import pyoxigraph as ox

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


def blank_opaque(text: str) -> str:
    """``text`` with strings, IRIs and comments replaced by spaces (offsets unchanged)."""
    return _OPAQUE.sub(lambda m: " " * len(m.group()), text)


# a keyword, not part of a variable (?x $x), a prefixed name (ex:word, word:x) or a longer name
_KEYWORDS = re.compile(r"(?<![^\W\d])(?<![:?$])(SERVICE|LOAD|FROM)(?![\w:])", re.IGNORECASE)
_UPDATE_TOKENS = re.compile(
    r"[{}]|(?<![^\W\d])(?<![:?$])(WHERE|USING|WITH|DELETE)(?![\w:])", re.IGNORECASE
)


def keywords(text: str) -> set[str]:
    """Which of SERVICE (outbound HTTP), LOAD (outbound HTTP, updates) and FROM (the query
    names its own dataset, so the union default graph must not override it) occur as
    keywords in ``text``, upper-cased."""
    return {m.upper() for m in _KEYWORDS.findall(blank_opaque(text))}


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
