"""Zero-shot relation paths: a ranking over the relation paths that exist around the topic.

For a question no training pattern covers, the candidates are the relation paths of length
1..``max_hops`` that are grounded in the graph from the topic entity (both directions per
step; a beam of ``beam`` prefixes per length; a frontier larger than ``frontier_cap`` is
sampled to its first ``frontier_cap`` entities when its relations are looked up). Each path
is scored against the question (its text with the topic mention as ``<e>``) by:

- *support* per step: how well the question's words name the step's relation — equal words
  or a common prefix of four or more characters against the relation's name and label
  (``_``, CamelCase and ``/a/b/c`` split), the sentence-embedding cosine of the question and
  the relation's words (with the ``rag`` extra), and, when a training split exists, the
  lift of the relation over its base rate among the training patterns that use the word.
  A word supports one step only, so a path is as long as the relations the question names
  (each step pays ``STEP_COST``); a relation named verbatim (code-like or not) earns a bonus;
- *direction*: the question's word order read with the relation's English reading
  (:mod:`kgengine.wording`: "the aunt of <e>" asks for the subject of ``aunt``, "whose aunt
  is <e>" for its object; "films directed by <e>" for the subject of ``directed_by``, "who
  directed <e>" for its object), plus, with embeddings, which direction's template question
  the question is closer to. Without a cue both directions stay ranked and the reasoning
  says the direction is uncertain;
- *answer type*: the question's answer word ("who", "what year", "which films") against the
  path's end — a numeric end (years, ratings) for "when"/"what year", never for "who"; the
  end's noun under the relation's reading ("genre" ends ``has_genre``);
- with a training split, the naive-Bayes path predictor's probability of the path
  (:class:`kgengine.rag.linking.classifier.PathClassifier`) as one more signal.

The ranking reads the graph only through a :class:`kgengine.rag.graph.view.GraphView` (the
steps around a set of entities, one step): the store's or the graph in memory, the same
ranking either way. The question's and the relations' cues are :mod:`kgengine.rag.linking.cues`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kgengine.rag.graph.steps import RelationPath, Step, format_path
from kgengine.rag.graph.view import GraphView
from kgengine.rag.linking.classifier import PathClassifier
from kgengine.rag.linking.cues import (
    SHARE_WORDS,
    AnswerType,
    QuestionCues,
    RelationCues,
    expected_direction,
    form_written,
)
from kgengine.rag.linking.vocabulary import Encoder, WordAssociations
from kgengine.rag.linking.words import word_similarity
from kgengine.wording import template_question

STEP_COST = 0.35  # support a step must exceed to be worth its hop
LENGTH_COST = 0.05  # per step: of equally supported paths, the shorter
VERBATIM_BONUS = 0.6
DIRECTION_WEIGHT = 0.5
TEMPLATE_WEIGHT = 2.0
NB_WEIGHT = 0.5
ORDER_WEIGHT = 0.2
SEMANTIC_FLOOR, SEMANTIC_SPAN = 0.2, 0.5  # cosine -> (cos - floor) / span, clipped to 0..1
SEMANTIC_WEIGHT = 0.3  # below STEP_COST: embeddings rank steps, the question's words pay for them
SHARE_SUPPORT = 0.8  # "share", "same": a step back along the relation just followed
HEAD_SHARE = 0.8  # a relation's head noun alone: this share of a full match


@dataclass(frozen=True)
class RankedPath:
    path: RelationPath
    score: float
    parts: tuple[tuple[str, float], ...]  # signal -> its share of the score
    direction: str  # how the first step's direction was decided

    def describe(self) -> str:
        shown = ", ".join(f"{name} {value:+.2f}" for name, value in self.parts if abs(value) >= 0.005)
        return f"{' / '.join(format_path(self.path))} ({self.score:.2f}: {shown})"


@dataclass
class _Prefix:
    path: RelationPath
    frontier: list[str]
    used: frozenset[int]
    parts: dict[str, float]
    direction: str = "only one direction exists from the topic"
    cue_distance: int | None = None  # tokens between the topic and the last named step's word
    claims: frozenset[tuple[int, str]] = frozenset()  # (word, relation): words a step's relation matched

    @property
    def score(self) -> float:
        return sum(self.parts.values())


class PathRanker:
    """Ranks the grounded relation paths around a topic against a question (module doc)."""

    def __init__(self, relation_labels: Mapping[str, str] | None = None, encoder: Encoder | None = None,
                 entity_labels: Mapping[str, str] | None = None, associations: WordAssociations | None = None,
                 classifier: PathClassifier | None = None, max_hops: int = 3, beam: int = 12,
                 frontier_cap: int = 1_000) -> None:
        self.relation_labels = dict(relation_labels or {})
        self.encoder, self.entity_labels = encoder, entity_labels or {}
        self.associations, self.classifier = associations, classifier
        self.max_hops, self.beam, self.frontier_cap = max_hops, beam, frontier_cap
        self._relations: dict[str, RelationCues] = {}
        self._vectors: dict[str, Any] = {}

    def cues(self, relation: str) -> RelationCues:
        found = self._relations.get(relation)
        if found is None:
            found = self._relations[relation] = RelationCues.of(relation, self.relation_labels.get(relation))
        return found

    def _embed(self, texts: Sequence[str]) -> list[Any]:
        """Unit vectors of ``texts`` (remembered: relation words and question words repeat)."""
        assert self.encoder is not None
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            for text, vector in zip(missing, self.encoder(missing), strict=True):
                self._vectors[text] = vector
        return [self._vectors[t] for t in texts]

    def rank(self, pattern: str, topic: str, view: GraphView, k: int = 5,
             derivable: Iterable[Step] = (), prior: Mapping[RelationPath, float] | None = None
             ) -> list[RankedPath]:
        """The ``k`` best grounded paths from ``topic`` for ``pattern``, best first.
        ``derivable``: one-step paths to rank although the topic has no such edge (the heads
        of mined rules, on an incomplete KG: the rules derive what the edge would give).
        ``prior``: path -> a share of the score (what similar training questions asked)."""
        question = QuestionCues.of(pattern)
        asked = re.sub(r"\s+", " ", pattern.replace("<e>", " ").replace("<E>", " ")).strip()
        classifier = self.classifier
        nb = classifier.slot_probabilities(pattern) if classifier is not None and classifier.paths else None
        done: list[_Prefix] = []
        level = [_Prefix((), [topic], frozenset(), {})]
        first_steps: Mapping[Step, int] = {}
        for depth in range(self.max_hops):
            extended: list[_Prefix] = []
            for prefix in level:
                steps = view.steps(prefix.frontier[: self.frontier_cap])
                if depth == 0:
                    steps = first_steps = {**dict.fromkeys(derivable, 0), **steps}
                extended += [self._extend(prefix, step, question, asked, first_steps)
                             for step in sorted(steps)]
            extended.sort(key=lambda p: (-p.score, len(p.path), format_path(p.path)))
            level = []
            for prefix in extended:
                if len(level) >= self.beam:
                    break
                grounded = first_steps.get(prefix.path[-1], 1) if depth == 0 else 1
                reached = view.follow(prefix.frontier[: self.frontier_cap], prefix.path[-1]) - {topic}
                if reached:
                    prefix.frontier = sorted(reached)
                    level.append(prefix)
                elif not grounded:  # derivable only: ranked, not walked further
                    prefix.frontier = []
                    done.append(prefix)
            done += level
        ranked = []
        for prefix in done:
            parts = dict(prefix.parts)
            parts["answer type"] = self._type_score(question.answer, prefix.path[-1], prefix.frontier)
            parts["length"] = -LENGTH_COST * len(prefix.path)
            if prior:
                parts["similar training questions"] = prior.get(prefix.path, 0.0)
            if nb is not None:  # the path's length, and its steps, as the training patterns' words predict
                slots = nb(prefix.path)
                parts["train length"] = NB_WEIGHT * slots.pop("length", 0.0)
                parts["train steps"] = NB_WEIGHT * sum(slots.values()) / max(1, len(slots))
            ranked.append(RankedPath(prefix.path, round(sum(parts.values()), 6), tuple(parts.items()),
                                     prefix.direction))
        ranked.sort(key=lambda r: (-r.score, len(r.path), format_path(r.path)))
        return ranked[:k]

    def _extend(self, prefix: _Prefix, step: Step, question: QuestionCues, asked: str,
                first_steps: Mapping[Step, int]) -> _Prefix:
        cues = self.cues(step.relation)
        parts = dict(prefix.parts)
        seen = any(s.relation == step.relation for s in prefix.path)
        # a word another relation of the path also matched is that relation's ("born in the
        # year <e>" asks birthYear, not birthYear then bornIn); it may name the same one again
        taken = prefix.used | {i for i, r in prefix.claims if r != step.relation}
        free = [(i, w) for i, w in question.words if i not in taken]
        signals = [_lexical(free, cues.words, question.anchor)]
        if prefix.path and prefix.path[-1] == Step(step.relation, not step.inverse):
            # back along the same relation: "films that share actors with <e>", "the same director"
            signals += [(SHARE_SUPPORT, frozenset({i})) for i, w in free if w in SHARE_WORDS]
        if self.associations is not None:  # not the answer's noun: "which person" names no relation
            signals += [(self.associations.get(w, step.relation), frozenset({i})) for i, w in free
                        if i != question.answer.position]
        support, used = max(signals, key=lambda x: x[0])
        if support <= 0:
            used = frozenset()
        else:  # a word's other form next to it goes with it: "the director that directed <e>"
            named = [(i, w) for i, w in question.words if i in used]
            used |= {i for i, w in free for j, x in named if abs(i - j) <= 2 and word_similarity(w, x) > 0}
        parts[f"step {len(prefix.path) + 1}"] = support - STEP_COST
        distance = (min(abs(i - question.anchor) for i in used)
                    if used and question.anchor is not None else None)
        if distance is not None and prefix.cue_distance is not None:
            # the hop nearest the topic is named nearest it: "directors of films starring <e>"
            parts["word order"] = parts.get("word order", 0.0) + (
                ORDER_WEIGHT if distance > prefix.cue_distance else -ORDER_WEIGHT)
        if not seen and self.encoder is not None:
            # the question against the relation's words: a tie-breaker that cannot pay for a
            # step by itself (single words embed too alike: "film" ~ "directed", "mother" ~ "father")
            question_vector, relation_vector = self._embed([asked, " ".join(cues.words) or step.relation])
            cosine = float(relation_vector @ question_vector)
            value = SEMANTIC_WEIGHT * min(1.0, max(0.0, (cosine - SEMANTIC_FLOOR) / SEMANTIC_SPAN))
            # the mean over the path's relations: more relations must not add up to more
            distinct = len({s.relation for s in prefix.path}) + 1
            parts["embedding"] = (parts.get("embedding", 0.0) * (distinct - 1) + value) / distinct
        if not seen and any(form_written(question, form, taken) for form in cues.verbatim):
            parts["named verbatim"] = parts.get("named verbatim", 0.0) + VERBATIM_BONUS
        direction = prefix.direction
        if not prefix.path and Step(step.relation, not step.inverse) in first_steps:
            # both directions exist from the topic: the question decides (by the words that
            # name the relation: a step no word names has no direction to read)
            expected = expected_direction(question, cues, used) if support >= STEP_COST else None
            if expected is not None:  # a penalty, not a bonus: a one-way step is not behind
                parts["direction"] = 0.0 if expected == step.inverse else -DIRECTION_WEIGHT
                direction = "from the question's word order and the relation's reading"
            elif self.encoder is not None and support >= STEP_COST:  # the farther direction pays
                parts["direction (templates)"] = TEMPLATE_WEIGHT * min(0.0, self._template_lean(asked, step))
                direction = ("both directions exist and no word-order cue: the closer template "
                             "question decides (uncertain)")
            else:
                direction = "both directions exist and the question gives no cue: both ranked (uncertain)"
        claims = prefix.claims | {(i, step.relation) for i, w in free
                                  if used and any(word_similarity(r, w) > 0 for r in cues.words)}
        return _Prefix((*prefix.path, step), prefix.frontier, prefix.used | used, parts, direction,
                       distance if distance is not None else prefix.cue_distance, frozenset(claims))

    def _template_lean(self, asked: str, step: Step) -> float:
        """How much closer the question is to this direction's template question than to the
        other's (cosine difference)."""
        label = self.relation_labels.get(step.relation)
        this = template_question(step.relation, "inverse" if step.inverse else "forward", "it", label)
        other = template_question(step.relation, "forward" if step.inverse else "inverse", "it", label)
        question, a, b = self._embed([asked, this, other])
        return float(a @ question - b @ question)

    def _type_score(self, answer: AnswerType, last: Step, ends: Sequence[str]) -> float:
        if answer.kind is None and answer.noun is None:
            return 0.0
        sample = ends[:50]
        numeric = sum(1 for e in sample if _NUMERIC.fullmatch(self.entity_labels.get(e, e).strip()))
        numeric_end = bool(sample) and numeric / len(sample) > 0.5
        person, noun = self.cues(last.relation).end(last.inverse)
        if answer.kind in ("temporal", "number"):
            return 0.5 if numeric_end else -0.7
        if numeric_end:  # "who ..." never ends in years; "which films" hardly
            return -1.0 if answer.kind == "person" else -0.3
        score = 0.0
        if answer.kind == "person":
            score += 0.3 if person else -0.3 if person is False and noun else 0.0
        elif answer.noun and person:  # "which films ..." does not end in people
            score -= 0.3
        if answer.noun and noun:
            score += 0.4 * max(word_similarity(answer.noun, n) for n in noun)
        return score


_NUMERIC = re.compile(r"[-+]?\d[\d,.]*(?:\s*[a-z%]{0,3})?|\d{4}-\d{2}(?:-\d{2})?")


def _lexical(free: Sequence[tuple[int, str]], relation: Sequence[str], anchor: int | None
             ) -> tuple[float, frozenset[int]]:
    """Mean over the relation's words of their best free question word, and the words the step
    uses: the matching word nearest the topic (of those at least half as good as the best;
    "films written by the writer of <e>": "writer" for the hop from <e>) and the matched words
    next to it ("release year", "causes_12") — not a match further away: "films starred by
    the actors in <e>" names ``starred_actors`` twice, once by each word."""
    if not relation or not free:
        return 0.0, frozenset()
    total, matched = 0.0, dict[int, float]()
    for r in relation:
        value = max(word_similarity(r, w) for _, w in free)
        total += value
        for i, w in free:
            similarity = word_similarity(r, w)
            if similarity > 0:
                matched[i] = max(similarity, matched.get(i, 0.0))
    if not matched:
        return 0.0, frozenset()
    # the phrase's head noun alone names it well ("actor" for starred_actors, "rating" for
    # has_imdb_rating), the modifiers alone do not
    head = next((r for r in reversed(relation) if not r.isdigit()), None)
    if head is not None and len(relation) > 1:
        total = max(total, HEAD_SHARE * len(relation) * max(word_similarity(head, w) for _, w in free))
    top = max(matched.values())
    near = [i for i, v in matched.items() if v >= top / 2]
    used = {min(near, key=lambda i: (abs(i - anchor) if anchor is not None else 0, -matched[i], i))}
    for i in sorted(matched, key=lambda i: min(abs(i - j) for j in used)):
        if i - 1 in used or i + 1 in used:
            used.add(i)
    return total / len(relation), frozenset(used)


