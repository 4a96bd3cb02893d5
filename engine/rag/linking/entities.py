"""Entity linking: which entity of the graph a question is about.

The topic comes, in this order, from the question's ``topic_entity`` (``--entity``: an id, a
private id or a label — exact, then case-insensitive — found through the entity search
queries ``entity_lookup`` / ``entity_search``), from a MetaQA-style ``[bracketed]`` mention, or
from a span of the free text that is an entity's id, private id or label (whole tokens,
case-blind). An entity that cannot be found raises :class:`EntityNotFoundError` with the
closest names (difflib).

Choosing among candidates (:meth:`GraphEntityLinker._choose`), best first:

1. spans of the free text (:meth:`GraphEntityLinker._cheap_key`): not a *question word* (a
   span made only of function words — lower-case, or the question's first word — and of words
   of the graph's relation names: "who", "director" beside ``directed_by``); then a name
   (capitalised, then a number, then lower-case); then the longest;
2. the entity *type* the question asks about: the number of the entity's relations (either
   direction, from ``entity_relations_out`` / ``entity_relations_in``) whose name shares a word
   with the question outside the mention — equal, a prefix of 4+ letters, or the same light
   stem ("star in" ~ ``starred_actors``, "tagged" ~ ``has_tags``);
3. the exact case before a case-folded match; an id before a private id before a label;
4. ties left: the sentence embedding (all-MiniLM-L6-v2, when :mod:`kgengine.rag.embeddings`
   can load it, offline) of the question against each candidate's name and relation names;
   then, the same with or without the model, the higher degree, the earlier span, the id.

Steps 2-4 also choose among the entities a bracket or a given topic names in several cases
(MetaQA names entities by their ids: a tag "john krasinski" beside the person)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from kgengine.errors import KGEngineError
from kgengine.model import Entity, Question
from kgengine.rag.base import LinkedEntity
from kgengine.rag.embeddings import LazyEncoder
from kgengine.rag.graph.steps import Step
from kgengine.rag.graph.store import StoreGraphView
from kgengine.rag.linking.patterns import find_mention
from kgengine.store import KGStore

_BRACKET = re.compile(r"\[([^\[\]]+)\]")
_TOKEN = re.compile(r"[\w'’.-]+|[^\w\s]")
_WORD = re.compile(r"[^\W\d_]+")  # the letters of a token: its words
_NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")  # CamelCase and snake_case pieces
MAX_SPAN_TOKENS = 32  # MetaQA's longest title is 15 tokens ("Don't Be a Menace to South Central ...")
MIN_PREFIX = 4  # a question word this long that begins a relation word (or the reverse) is related
# English function words: a span made only of these (in lower case) names no topic ("who", "it")
_FUNCTION_TEXT = """
a an the of in on at by for with to from into onto about as than then and or nor not no
is are was were be been being am do does did done has have had having can could will would
shall should may might must who whom whose what which when where why how that this these those
there here it its me my mine i you your we our us they them their he him his she her hers
any some all each every many much more most one ones list name names give tell show find
"""
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
_SUFFIXES = ("ings", "ing", "ers", "er", "ors", "or", "ed", "en", "es", "s")
# a bare word is the stem of one with these (act ~ actors, tag ~ tags), not of -ing/-ed/-en
# forms (rat is not rating)
_BARE_STEM_SUFFIXES = frozenset({"ers", "er", "ors", "or", "es", "s"})
TextEncoderFn = Callable[[Sequence[str]], Any]  # texts -> unit-length vectors (numpy rows)


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
    """Links questions to entities of one graph (an :class:`kgengine.rag.base.EntityLinker`).

    ``encoder``: the tie-break's sentence encoder (texts -> unit vectors); ``"default"`` loads
    all-MiniLM-L6-v2 the first time a tie needs it (and goes without, deterministically, if it
    cannot be loaded); None: no embedding tie-break."""

    def __init__(self, store: KGStore, graph: str,
                 encoder: TextEncoderFn | Literal["default"] | None = "default") -> None:
        self.store, self.graph = store, graph
        # "default": loaded by the first tie that needs it (and never, in most runs)
        self._encoder: TextEncoderFn | LazyEncoder | None = LazyEncoder() if encoder == "default" else encoder
        self._question_word_memo: dict[str, bool] = {}

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

    @cached_property
    def _relation_words(self) -> dict[str, frozenset[str]]:
        """Relation -> the words of its name and label, lower-cased (built once)."""
        labels = self.store.relation_labels(self.graph)
        relations = [row["r"] for row in self.store.run("relation_counts", self.graph)]
        return {r: frozenset(_name_words(r) | _name_words(labels.get(r, ""))) for r in relations}

    @cached_property
    def _all_relation_words(self) -> frozenset[str]:
        return frozenset(w for words in self._relation_words.values() for w in words)

    def resolve(self, name: str, question: str | None = None) -> EntityMatch:
        """The entity ``name`` names (id, private id or label; exact before case-insensitive;
        prefix matches do not count), else :class:`EntityNotFoundError` with close matches.
        With the ``question`` it was named in, entities sharing the name are told apart by the
        type the question asks about (see the module docstring), e.g. a person and a tag
        both named "john krasinski" in "which films did john krasinski star in"."""
        matches = [m for m in search_entities(self.store, self.graph, name, limit=None, exact_id_only=True)
                   if m.match != "label prefix"]
        if not matches:
            raise EntityNotFoundError(
                f"no entity {name!r} in graph {self.graph!r} (by id, private id or label)"
                + self._suggest(name))
        if question is None:
            return matches[0]
        first = matches[0]
        if first.match == "id" and len(matches) == 1:
            if first.label is None or first.label.casefold() != name.casefold():
                return first  # an opaque id (Q60, e01234) names one entity
            # an id that is also the entity's name (MetaQA: entities are named by their ids):
            # other entities may bear the name in another case (a tag "john krasinski")
            matches += [m for m in self._named(name) if m.id != first.id]
        if len({m.id for m in matches}) == 1:
            return first
        start = find_mention(question, name)
        end = start + len(name) if start >= 0 else -1
        chosen = self._choose([_Candidate(m.id, m.match, _written(m), name, start, end) for m in matches],
                              question)
        picked = next(m for m in matches if m.id == chosen.entity and m.match == chosen.kind)
        if picked is first or picked.private_id is not None:
            return picked
        # found in memory (by its label): its private id from the store
        full = search_entities(self.store, self.graph, picked.id, limit=1, exact_id_only=True)
        return EntityMatch(picked.id, picked.label, full[0].private_id if full else None, picked.match)

    def _named(self, name: str) -> list[EntityMatch]:
        """The entities whose label or private id is ``name`` in any case (from memory)."""
        out = []
        for entity, kind, written in self._surfaces.get(name.casefold(), []):
            if kind == "id":
                continue
            match = kind if written == name or kind == "private id" else "label (case-insensitive)"
            out.append(EntityMatch(entity, written if kind == "label" else None,
                                   written if kind == "private id" else None, match))
        return out

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
        return self._suggest_any([name], fallback_search=True)

    def _suggest_any(self, names: Sequence[str], fallback_search: bool = False) -> str:
        """"; close matches: ..." for the surfaces closest to any of ``names`` (best first),
        else (``fallback_search``) the entities whose label starts with the first name."""
        scored: dict[str, float] = {}
        for name in names:
            folded = name.casefold()
            for key in difflib.get_close_matches(folded, list(self._surfaces), n=5, cutoff=0.6):
                ratio = difflib.SequenceMatcher(None, folded, key).ratio()
                scored[key] = max(scored.get(key, 0.0), ratio)
        close = sorted(scored, key=lambda key: (-scored[key], key))[:5]
        if not close and fallback_search and names:
            prefixed = search_entities(self.store, self.graph, names[0], limit=5)
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
            match = self.resolve(question.topic_entity, text)
            return LinkedEntity(match.id, self._mention(text, question.topic_entity, match),
                                f"topic entity ({match.match})")
        bracket = _BRACKET.search(text)
        if bracket is not None:
            match = self.resolve(bracket.group(1), text)
            return LinkedEntity(match.id, bracket.group(1), f"[bracket] ({match.match})")
        found = self._longest_span(text)
        if found is None:
            raise EntityNotFoundError(
                f"no entity of graph {self.graph!r} is named in the question {text!r}; "
                "give one with --entity (an id, private id or label)"
                + self._suggest_any(self._content_runs(text)))
        return found

    def _mention(self, text: str, given: str, match: EntityMatch) -> str | None:
        """The string of the question that names the entity: the given name, else its id,
        private id or label, whichever occurs in the text as whole tokens."""
        for candidate in (given, match.id, match.private_id, match.label):
            if candidate and find_mention(text, candidate) != -1:
                return candidate
        return None

    def _longest_span(self, text: str) -> LinkedEntity | None:
        """The entity named in the free text: every span of whole tokens that is a surface form
        is a candidate, chosen as the module docstring says (a name before a question word that
        happens to be an entity, "Kismet" before "director"; then the longest, ...)."""
        tokens = list(_TOKEN.finditer(text))
        candidates: list[_Candidate] = []
        for i in range(len(tokens)):
            for j in range(i, min(len(tokens), i + MAX_SPAN_TOKENS)):
                start, end = tokens[i].start(), tokens[j].end()
                span = text[start:end]
                found = self._surfaces.get(span.casefold())
                if not found and span.endswith("."):  # a sentence's full stop is not the name's
                    span = span.rstrip(".")
                    end = start + len(span)
                    found = self._surfaces.get(span.casefold())
                for entity, kind, written in found or ():
                    candidates.append(_Candidate(entity, kind, written, span, start, end,
                                                 self._cheap_key(span, tokens[i:j + 1], i == 0, written)))
        if not candidates:
            return None
        best = self._choose(candidates, text)
        return LinkedEntity(best.entity, best.mention, f"text match ({best.kind})")

    def _cheap_key(self, span: str, tokens: Sequence[re.Match[str]], initial: bool,
                   written: str) -> tuple[int, int, int]:
        """(wording, name, -length), smaller first: what a span of the text says by itself.
        Wording 0: a name's words, 1: punctuation only (a film "$"), 2: question words. Name
        0: capitalised (a title may start with a number or a quote: "13 Assassins", "'night,
        Mother"; a capital at the question's start counts only if the entity has it too), 1: a
        number (written alike in any case), 2: lower-case."""
        if all(not any(ch.isalnum() for ch in t.group()) for t in tokens):
            wording = 1
        else:
            wording = 2 if all(self._question_token(t.group(), initial and k == 0)
                               for k, t in enumerate(tokens)) else 0
        first = next((ch for ch in span if ch.isalnum()), "")
        capitalised = first.isupper() or (
            not span[:1].isalpha() and any(t.group()[:1].isupper() for t in tokens))
        name = 0 if capitalised and (not initial or span == written) else 1 if first.isdigit() else 2
        return wording, name, -len(span)

    def _question_token(self, word: str, first: bool) -> bool:
        """Whether a token of the question is part of its wording rather than of a name:
        punctuation, a function word (lower-case, or the question's first word), or words of
        the graph's relation names ("director", "starred")."""
        lower = word.casefold()
        if not any(c.isalnum() for c in word):
            return True
        if lower in FUNCTION_WORDS and (word == lower or first):
            return True
        if lower not in self._question_word_memo:
            words = _words(lower)
            self._question_word_memo[lower] = bool(words) and all(
                any(_related(w, r) for r in self._all_relation_words) for w in words)
        return self._question_word_memo[lower]

    def _choose(self, candidates: list[_Candidate], text: str) -> _Candidate:
        """The best candidate (the module docstring's order); store queries only for those
        still tied on what the text says by itself."""
        best_cheap = min(c.cheap for c in candidates)
        tied = _dedupe([c for c in candidates if c.cheap == best_cheap])
        if len({c.entity for c in tied}) == 1:
            return min(tied, key=lambda c: (c.mention != c.written, _MATCH_ORDER.index(_kind(c)), c.start))
        relations = {e: self._relations(e) for e in {c.entity for c in tied}}

        def typed(c: _Candidate) -> tuple[int, bool, int]:
            words = _question_words(text, c.start, c.end)
            shared = sum(1 for r in {r for r, _inverse in relations[c.entity]}
                         if any(_related(w, x) for w in words for x in self._relation_words.get(r, ())))
            return -shared, c.mention != c.written, _MATCH_ORDER.index(_kind(c))

        best_typed = min(typed(c) for c in tied)
        tied = [c for c in tied if typed(c) == best_typed]
        similarity = dict.fromkeys(range(len(tied)), 0.0)
        if len({c.entity for c in tied}) > 1:
            similarity = self._similarities(text, tied, relations)

        def degree(entity: str) -> int:
            return sum(relations[entity].values())

        order = sorted(range(len(tied)), key=lambda k: (-similarity[k], -degree(tied[k].entity),
                                                        tied[k].start, tied[k].entity))
        return tied[order[0]]

    def _relations(self, entity: str) -> Mapping[Step, int]:
        """(relation, inverse) -> facts, around one entity."""
        return StoreGraphView(self.store, self.graph).steps([entity])

    def _similarities(self, text: str, tied: Sequence[_Candidate],
                      relations: dict[str, Mapping[Step, int]]) -> dict[int, float]:
        """Cosine of the question and each candidate's name and relations (0.0 for all without
        an encoder: the deterministic order decides)."""
        encode = self._load_encoder()
        if encode is None:
            return dict.fromkeys(range(len(tied)), 0.0)
        descriptions = []
        for c in tied:
            counts: dict[str, int] = {}
            for (r, _inverse), n in relations[c.entity].items():
                counts[r] = counts.get(r, 0) + n
            names = sorted(counts, key=lambda r: (-counts[r], r))[:8]
            described = ", ".join(" ".join(_name_parts(r)) for r in names)
            descriptions.append(f"{c.written}: {described}" if described else c.written)
        vectors = encode([text, *descriptions])
        # rounded: a last-digit difference between runs must not flip the order
        return {k: round(float(vectors[0] @ vectors[k + 1]), 4) for k in range(len(tied))}

    def _load_encoder(self) -> TextEncoderFn | None:
        if isinstance(self._encoder, LazyEncoder):  # None when no model loads here: the deterministic order
            return self._encoder.load()
        return self._encoder

    def _content_runs(self, text: str) -> list[str]:
        """The runs of the question's tokens that are not question words (what a name it
        misspells could be), longest first: where to look for close matches."""
        runs: list[list[str]] = [[]]
        for k, token in enumerate(_TOKEN.finditer(text)):
            if self._question_token(token.group(), k == 0):
                runs.append([])
            else:
                runs[-1].append(token.group())
        found = [" ".join(run) for run in runs if run]
        return sorted(found, key=lambda run: -len(run))[:4]


@dataclass(frozen=True)
class _Candidate:
    """One way the question may name an entity: ``mention`` at ``start``:``end`` of the text
    (-1: not in it) matches the entity's id, private id or label ``written``."""

    entity: str
    kind: str  # "id", "private id", "label" or an EntityMatch kind
    written: str
    mention: str
    start: int
    end: int
    cheap: tuple[int, int, int] = (0, 0, 0)  # see GraphEntityLinker._cheap_key


def _kind(c: _Candidate) -> str:
    """The candidate's EntityMatch kind (an exact-case or case-folded label)."""
    if c.kind == "label":
        return "label" if c.mention == c.written else "label (case-insensitive)"
    return c.kind


def _dedupe(candidates: Iterable[_Candidate]) -> list[_Candidate]:
    """One candidate per (entity, span): its best way of matching (exact case, then kind)."""
    best: dict[tuple[str, int, int], _Candidate] = {}
    for c in candidates:
        key = (c.entity, c.start, c.end)
        rank = (c.mention != c.written, _MATCH_ORDER.index(_kind(c)))
        held = best.get(key)
        if held is None or rank < (held.mention != held.written, _MATCH_ORDER.index(_kind(held))):
            best[key] = c
    return list(best.values())


def _written(match: EntityMatch) -> str:
    if match.match == "private id" and match.private_id:
        return match.private_id
    if match.match.startswith("label") and match.label:
        return match.label
    return match.id


def _name_parts(name: str) -> list[str]:
    """The words of a relation's name: snake_case, CamelCase, /paths (``/film/film/directed_by``)."""
    return [part.lower() for part in _NAME_PART.findall(name)]


def _name_words(name: str) -> set[str]:
    return {part for part in _name_parts(name) if len(part) >= 3 and part not in FUNCTION_WORDS}


def _words(token: str) -> list[str]:
    return [w for w in _WORD.findall(token) if len(w) >= 3 and w not in FUNCTION_WORDS]


def _question_words(text: str, start: int, end: int) -> set[str]:
    """The question's words outside the mention, lower-cased (function words left out)."""
    outside = text[:start] + " " + text[end:] if start >= 0 else text
    return {w for token in _TOKEN.findall(outside.casefold()) for w in _words(token)}


def _stem(word: str) -> tuple[str, str]:
    """A light stem and the suffix taken off: one common suffix, then a doubled last consonant
    undone (tagged -> tag, written -> writ)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
                word = word[:-1]
            return word, suffix
    return word, ""


def _related(word: str, other: str) -> bool:
    """Whether a question word and a relation-name word are the same word: equal, one a prefix
    of the other of MIN_PREFIX+ letters (star ~ starred; not relentless ~ release), or the same
    light stem (acted ~ actors, director ~ directed, tagged ~ tags, writers ~ written)."""
    if word == other:
        return True
    short, long = sorted((word, other), key=len)
    if len(short) >= MIN_PREFIX and long.startswith(short):
        return True
    (stem, suffix), (other_stem, other_suffix) = _stem(word), _stem(other)
    if stem != other_stem:
        return False
    return bool(suffix and other_suffix) or (suffix or other_suffix) in _BARE_STEM_SUFFIXES
