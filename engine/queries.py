"""Named queries: every graph operation is a file ``sparql/NAME.rq`` with a twin
``cypher/NAME.cypher``, shipped as package data and read here (never inline strings)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

from kgengine.errors import KGEngineError

_LANGS = {"sparql": ("kgengine.sparql", ".rq"), "cypher": ("kgengine.cypher", ".cypher")}


@cache
def query_text(language: str, name: str) -> str:
    """Text of the named query; raises KeyError naming the missing file."""
    package, suffix = _LANGS[language]
    path = resources.files(package) / f"{name}{suffix}"
    if not path.is_file():
        raise KeyError(f"no query {name!r}: {package.split('.')[-1]}/{name}{suffix} does not exist")
    return path.read_text(encoding="utf-8")


def query_names(language: str) -> list[str]:
    package, suffix = _LANGS[language]
    return sorted(
        p.name[: -len(suffix)] for p in resources.files(package).iterdir() if p.name.endswith(suffix)
    )


_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def fill_template(template: str, parts: Mapping[str, str]) -> str:
    """Replace the ``{{name}}`` placeholders of a query file with generated patterns; every
    placeholder must be filled (the patterns are escaped by whoever generated them)."""

    def replace(match: re.Match[str]) -> str:
        try:
            return parts[match.group(1)]
        except KeyError:
            raise KeyError(f"query placeholder {{{{{match.group(1)}}}}} not filled") from None

    return _PLACEHOLDER.sub(replace, template)


def relationship_type(relation: str) -> str:
    """The relation as a Cypher relationship type: backtick-quoted, backticks doubled.

    Neo4j accepts any token name except an empty one or one with a NUL character (checked
    on 5.26: spaces, quotes, ``})-[``, newlines, 70,000 characters all round-trip)."""
    if not isinstance(relation, str) or not relation:
        raise KGEngineError(f"invalid relation name {relation!r}: Neo4j needs a non-empty name")
    if "\x00" in relation:
        raise KGEngineError(f"invalid relation name {relation!r}: Neo4j refuses NUL characters")
    return "`" + relation.replace("`", "``") + "`"
