"""pyoxigraph terms ⇄ Python values: a named query's cells as kgengine values, a user's query
cells as their lexical text, and query parameters as RDF terms (serialised by pyoxigraph,
so nothing is pasted into a query raw)."""

from __future__ import annotations

from collections.abc import Iterable

import pyoxigraph as ox
from kgengine import terms
from kgengine.model import Entity, Relation

XSD = "http://www.w3.org/2001/XMLSchema#"
_INT_TYPES = {XSD + t for t in ("integer", "int", "long", "short", "nonNegativeInteger")}
_FLOAT_TYPES = {XSD + t for t in ("decimal", "double", "float")}

# what a query may bind a variable to (pyoxigraph's Store.query substitutions)
Term = ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple
Value = str | int | float | bool | None


def python_value(term: Term | None) -> Value:
    """A named query's cell: an IRI decoded to its id or name, a number or boolean literal
    as the number or boolean, any other literal as its text."""
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


def lexical(term: Term | None) -> str | None:
    """A user's query cell: the term's value (IRI, literal text, blank node id)."""
    if term is None:
        return None
    if isinstance(term, ox.NamedNode | ox.Literal | ox.BlankNode):
        return term.value
    return str(term)  # an RDF-star quoted triple


def query_term(value: object) -> Term:
    """A named query's parameter as an RDF term."""
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


def fill_values(text: str, name: str, rows: Iterable[object]) -> str:
    """Fill the query's empty ``VALUES ?name {}`` (or ``VALUES (?a ?b) {}``) block.

    Each value becomes an RDF term serialised by pyoxigraph, so nothing is pasted raw."""
    single = f"VALUES ?{name} {{}}"
    if single in text:
        body = " ".join(str(query_term(v)) for v in rows)
        return text.replace(single, f"VALUES ?{name} {{ {body} }}")
    raise KeyError(f"list parameter {name!r} needs a 'VALUES ?{name} {{}}' block in the query")
