"""Entity linking: which entity of the graph a question is about.

The topic comes, in this order, from the question's ``topic_entity`` (``--entity``: an id, a
private id or a label — exact, then case-insensitive — found through the entity search
queries ``entity_lookup`` / ``entity_search``), from a MetaQA-style ``[bracketed]`` mention, or
from the longest span of the question text that is an entity's id, private id or label
(whole tokens, case-blind; the earliest of equally long spans). An entity that cannot be found
raises :class:`EntityNotFoundError` with the closest names (difflib)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cached_property

from kgengine.errors import KGEngineError
from kgengine.model import Entity
from kgengine.rag.base import LinkedEntity, Question
from kgengine.rag.paths import find_mention
from kgengine.store import KGStore

_BRACKET = re.compile(r"\[([^\[\]]+)\]")
_TOKEN = re.compile(r"[\w'’.-]+|[^\w\s]")
MAX_SPAN_TOKENS = 12


class EntityNotFoundError(KGEngineError):
    pass


@dataclass(frozen=True)
class EntityMatch:
    """One entity search result; ``match`` says how it matched (id, private id, label,
    label (case-insensitive), label prefix)."""

    id: str
    label: str | None
    private_id: str | None
    match: str

    def to_json(self) -> dict[str, str | None]:
        return {"id": self.id, "label": self.label, "private_id": self.private_id, "match": self.match}


_MATCH_ORDER = ("id", "private id", "label", "label (case-insensitive)", "label prefix")


def search_entities(store: KGStore, graph: str, text: str, limit: int | None = 20,
                    exact_id_only: bool = False) -> list[EntityMatch]:
    """Entities named ``text``: by id (exact), private id (exact, then case-insensitive), label
    (exact, case-insensitive, prefix), best matches first. ``exact_id_only``: an entity whose
    id is ``text`` is returned alone, without searching labels (linking's fast path)."""
    text = text.strip()
    if not text:
        return []
    found: dict[str, EntityMatch] = {}
    for row in store.run("entity_lookup", graph, e=[Entity(text)]):
        found[row["e"]] = EntityMatch(row["e"], row["label"], row["private"], "id")
    if found and exact_id_only:
        return list(found.values())
    lowered = text.casefold()
    for row in store.run("entity_search", graph, text=text.lower()):
        entity, label, private = row["e"], row["label"], row["private"]
        if entity in found:
            continue
        if private is not None and private.casefold() == lowered:
            kind = "private id"
        elif label == text:
            kind = "label"
        elif label is not None and label.casefold() == lowered:
            kind = "label (case-insensitive)"
        else:
            kind = "label prefix"
        found[entity] = EntityMatch(entity, label, private, kind)
    ranked = sorted(found.values(), key=lambda m: (_MATCH_ORDER.index(m.match), len(m.label or m.id), m.id))
    return ranked if limit is None else ranked[:limit]


class GraphEntityLinker:
    """Links questions to entities of one graph (an :class:`kgengine.rag.base.EntityLinker`)."""

    def __init__(self, store: KGStore, graph: str) -> None:
        self.store, self.graph = store, graph

    @cached_property
    def _surfaces(self) -> dict[str, list[tuple[str, str, str]]]:
        """Case-folded surface form -> [(entity, kind, surface as written)], for text matching
        and suggestions: every entity's id, private id and label (built once, on first need)."""
        out: dict[str, list[tuple[str, str, str]]] = {}
        for entity, private in self.store.private_ids(self.graph).items():
            out.setdefault(entity.casefold(), []).append((entity, "id", entity))
            out.setdefault(private.casefold(), []).append((entity, "private id", private))
        for entity, label in self.store.labels(self.graph).items():
            out.setdefault(label.casefold(), []).append((entity, "label", label))
        return out

    def resolve(self, name: str) -> EntityMatch:
        """The entity ``name`` names (id, private id or label; exact before case-insensitive;
        prefix matches do not count), else :class:`EntityNotFoundError` with close matches."""
        matches = [m for m in search_entities(self.store, self.graph, name, limit=None, exact_id_only=True)
                   if m.match != "label prefix"]
        if matches:
            return matches[0]
        raise EntityNotFoundError(
            f"no entity {name!r} in graph {self.graph!r} (by id, private id or label)"
            + self._suggest(name))

    def lookup(self, name: str) -> str | None:
        """The entity a surface form of a training file names (id, private id or label), in
        memory: the exact-case one first, else by kind (id, private id, label); None if none."""
        found = self._surfaces.get(name.casefold())
        if not found:
            return None
        exact = [c for c in found if c[0] == name]
        if exact:
            return exact[0][0]
        order = ("id", "private id", "label")
        return min(found, key=lambda c: (order.index(c[1]), c[0]))[0]

    def _suggest(self, name: str) -> str:
        close = difflib.get_close_matches(name.casefold(), list(self._surfaces), n=5, cutoff=0.6)
        if not close:
            prefixed = search_entities(self.store, self.graph, name, limit=5)
            close = [(m.label or m.id).casefold() for m in prefixed]
        shown = []
        for key in close:
            for entity, kind, written in self._surfaces.get(key, [])[:1]:
                shown.append(repr(entity) if kind == "id" else f"{written!r} ({entity})")
        return "; close matches: " + ", ".join(shown) if shown else ""

    def link(self, question: Question) -> str:
        return self.link_mention(question).id

    def link_mention(self, question: Question) -> LinkedEntity:
        text = question.text
        if question.topic_entity:
            match = self.resolve(question.topic_entity)
            return LinkedEntity(match.id, self._mention(text, question.topic_entity, match),
                                f"topic entity ({match.match})")
        bracket = _BRACKET.search(text)
        if bracket is not None:
            match = self.resolve(bracket.group(1))
            return LinkedEntity(match.id, bracket.group(1), f"[bracket] ({match.match})")
        found = self._longest_span(text)
        if found is None:
            raise EntityNotFoundError(
                f"no entity of graph {self.graph!r} is named in the question {text!r}; "
                "give one with --entity (an id, private id or label)")
        return found

    def _mention(self, text: str, given: str, match: EntityMatch) -> str | None:
        """The string of the question that names the entity: the given name, else its id,
        private id or label, whichever occurs in the text as whole tokens."""
        for candidate in (given, match.id, match.private_id, match.label):
            if candidate and find_mention(text, candidate) != -1:
                return candidate
        return None

    def _longest_span(self, text: str) -> LinkedEntity | None:
        """The entity named in the text: a capitalised span (a name: "Kismet") before a
        lower-case one (a question word that happens to be an entity: "director"), then the
        longest, then the earliest."""
        tokens = list(_TOKEN.finditer(text))
        best: tuple[bool, int, int, str, str, str] | None = None  # (lower-case, -length, start, ...)
        for i in range(len(tokens)):
            for j in range(i, min(len(tokens), i + MAX_SPAN_TOKENS)):
                start, end = tokens[i].start(), tokens[j].end()
                span = text[start:end]
                candidates = self._surfaces.get(span.casefold()) or self._surfaces.get(
                    span.rstrip(".").casefold())
                if not candidates:
                    continue
                entity, kind, _ = min(candidates, key=lambda c: (_MATCH_ORDER.index(c[1]), c[0]))
                key = (span[:1].islower(), -(end - start), start, entity, kind, span)
                if best is None or key < best:
                    best = key
        if best is None:
            return None
        return LinkedEntity(best[3], best[5], f"text match ({best[4]})")
