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
  (:class:`kgengine.rag.paths.PathClassifier`) as one more signal.

The ranking is pure over a :class:`StepSource` (the graph's steps around a set of entities):
:class:`AdjacencySteps` in memory, :class:`StoreSteps` through the store's named queries."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kgengine.model import Entity, Relation
from kgengine.rag.paths import (
    STOPWORDS,
    GraphAdjacency,
    PathClassifier,
    RelationPath,
    Step,
    format_path,
    question_words,
    relation_words,
    word_similarity,
)
from kgengine.store import KGStore
from kgengine.wording import (
    KINSHIP,
    Reading,
    humanize,
    is_person,
    phrase_for,
    template_question,
    word_set,
)

Encoder = Callable[[Sequence[str]], Any]  # texts -> array of L2-normalised rows

STEP_COST = 0.35  # support a step must exceed to be worth its hop
LENGTH_COST = 0.05  # per step: of equally supported paths, the shorter
VERBATIM_BONUS = 0.6
DIRECTION_WEIGHT = 0.5
TEMPLATE_WEIGHT = 2.0
NB_WEIGHT = 0.5
ORDER_WEIGHT = 0.2
# learned word -> relation lifts: shrunk by SHRINK pseudo-patterns at the base rate, and
# weighted below a relation's own name (held-out wordings reuse the words of known ones:
# "who is listed as <screenwriter|director> of")
SHRINK, LEARNED_WEIGHT = 3.0, 0.7
SEMANTIC_FLOOR, SEMANTIC_SPAN = 0.2, 0.5  # cosine -> (cos - floor) / span, clipped to 0..1
SEMANTIC_WEIGHT = 0.3  # below STEP_COST: embeddings rank steps, the question's words pay for them
SHARE_SUPPORT = 0.8  # "share", "same": a step back along the relation just followed
HEAD_SHARE = 0.8  # a relation's head noun alone: this share of a full match
# a question with words training never used: the paths of the training questions it reads like
SIMILAR_WEIGHT, SIMILAR_SPREAD = 0.8, 0.05


# ---- the graph around the topic -----------------------------------------------------------
class StepSource(Protocol):
    def steps(self, frontier: Sequence[str]) -> Mapping[Step, int]:
        """The steps leaving any of ``frontier`` (relation and direction -> edges)."""
        ...

    def follow(self, frontier: Sequence[str], step: Step) -> set[str]:
        """The entities one ``step`` away from ``frontier``."""
        ...


@dataclass
class AdjacencySteps:
    adjacency: GraphAdjacency

    def steps(self, frontier: Sequence[str]) -> Mapping[Step, int]:
        out: Counter[Step] = Counter()
        for entity in frontier:
            for step, neighbours in self.adjacency.steps(entity).items():
                out[step] += len(neighbours)
        return out

    def follow(self, frontier: Sequence[str], step: Step) -> set[str]:
        return {n for e in frontier for n in self.adjacency.neighbours(e, step)}


@dataclass
class StoreSteps:
    """Through the ``entity_relations_out``/``_in`` and ``answer_step_*`` named queries."""

    store: KGStore
    graph: str

    def steps(self, frontier: Sequence[str]) -> Mapping[Step, int]:
        entities = [Entity(e) for e in frontier]
        out: Counter[Step] = Counter()
        for inverse, name, var in ((False, "entity_relations_out", "h"), (True, "entity_relations_in", "t")):
            for row in self.store.run(name, self.graph, **{var: entities}):
                out[Step(row["r"], inverse)] += int(row["n"])
        return out

    def follow(self, frontier: Sequence[str], step: Step) -> set[str]:
        name, var, other = ("answer_step_in", "t", "h") if step.inverse else ("answer_step_out", "h", "t")
        rows = self.store.run(name, self.graph, r=Relation(step.relation),
                              **{var: [Entity(e) for e in frontier]})
        return {row[other] for row in rows}


# ---- the question ---------------------------------------------------------------------------
_TOKEN = re.compile(r"<e>|[a-z0-9]+(?:'s)?")
TEMPORAL_WORDS = word_set("year years date dates decade when time")
SHARE_WORDS = word_set("share shares shared sharing same also common other others too co")
NUMBER_WORDS = word_set("rating ratings score votes number amount count population height")
_SKIP_AFTER_WH = word_set("is are was were the a an kind sort type types of do does did")


@dataclass(frozen=True)
class AnswerType:
    kind: str | None = None  # "person", "temporal", "number" or None
    noun: str | None = None  # "films" in "which films ..."
    position: int | None = None  # the noun's token: it names the answer, not a step (unless lexically)


def answer_type(tokens: Sequence[str]) -> AnswerType:
    """What the question asks for, from its first question word and the noun after a
    "what"/"which" ("which films" -> "films"; "what release year" -> temporal, "year")."""
    for i, token in enumerate(tokens):
        if token in ("who", "whom", "whose"):
            return AnswerType("person")
        if token == "when":
            return AnswerType("temporal")
        if token == "how" and i + 1 < len(tokens) and tokens[i + 1] in ("many", "much"):
            return AnswerType("number")
        if token in ("what", "which"):
            rest = list(tokens[i + 1:i + 6])
            j = next((n for n, w in enumerate(rest) if w not in _SKIP_AFTER_WH), None)
            if j is None or rest[j] == "<e>" or rest[j] in STOPWORDS:
                return AnswerType()
            noun, position = rest[j], i + 1 + j
            if j + 1 < len(rest) and rest[j + 1] in TEMPORAL_WORDS | NUMBER_WORDS:  # "release year"
                noun, position = rest[j + 1], position + 1
            if noun in TEMPORAL_WORDS:
                return AnswerType("temporal", noun, position)
            if noun in NUMBER_WORDS:
                return AnswerType("number", noun, position)
            return AnswerType("person" if is_person(noun) else None, noun, position)
    return AnswerType()


@dataclass
class QuestionCues:
    """The question's tokens, content words (with positions), topic position, answer type."""

    pattern: str
    tokens: list[str]
    words: list[tuple[int, str]]
    anchor: int | None
    answer: AnswerType

    @classmethod
    def of(cls, pattern: str) -> QuestionCues:
        tokens = _TOKEN.findall(pattern.lower())
        content = set(question_words(pattern)) | SHARE_WORDS  # "also" is a stopword elsewhere
        words = [(i, t.removesuffix("'s")) for i, t in enumerate(tokens)
                 if t != "<e>" and t.removesuffix("'s") in content]
        anchor = tokens.index("<e>") if "<e>" in tokens else None
        return cls(pattern, tokens, words, anchor, answer_type(tokens))


# ---- relations ------------------------------------------------------------------------------
@dataclass
class RelationCues:
    name: str
    words: list[str]
    verbatim: list[str]  # forms that, written in the question, name this relation alone
    reading: Reading
    phrase_text: str
    person: bool
    subject_type: str
    by_verb: bool  # "directed_by": the active voice ("who directed <e>") reverses the order
    opaque: bool  # a code ("causes_12"): no English reading, the question's word order decides

    @classmethod
    def of(cls, name: str, label: str | None) -> RelationCues:
        phrase = phrase_for(name, label)
        forms = {name.lower(), humanize(name)}
        if label:
            forms |= {label.lower(), humanize(label)}
        tail = name.rstrip("/").rsplit("/", 1)[-1]
        if tail != name:
            forms.add(humanize(tail))
        # "directed_by", "/film/film/directed_by": an "r by" verb whatever the reading says
        reading = Reading.VERB if phrase.text.split()[-1:] == ["by"] else phrase.reading
        by_verb = reading == Reading.VERB and phrase.text.split()[-1:] == ["by"]
        # a Freebase-style path names its relation in the last segment; the first ones are
        # the subject's type ("/film/film/genre": "film" is what has the genre, not a cue)
        words = relation_words(tail if tail != name else name, label)
        opaque = any(w.isdigit() for w in words) and not label
        return cls(name, words, sorted(f for f in forms if f), reading, phrase.text, phrase.person,
                   phrase.subject_type, by_verb, opaque)

    def end(self, inverse: bool) -> tuple[bool | None, list[str]]:
        """(are the step's end entities people, their noun's words) under the reading."""
        if self.reading == Reading.NOUN_OF:
            kin = self.phrase_text in KINSHIP
            return (self.person, self.phrase_text.split()) if inverse else (True if kin else None, [])
        if self.reading == Reading.ATTRIBUTE:
            if not inverse:
                return self.person, self.phrase_text.split()
            return (is_person(self.subject_type) if self.subject_type else None), self.subject_type.split()
        return (self.person if not inverse and self.by_verb else None), []


def _named(question: QuestionCues, form: str, taken: frozenset[int]) -> bool:
    """Whether ``form`` (a relation's name or label) is written in the question, on words no
    earlier step took."""
    words = _TOKEN.findall(form.lower())
    tokens, n = question.tokens, len(words)
    return n > 0 and any(tokens[i:i + n] == words and not taken & set(range(i, i + n))
                         for i in range(len(tokens) - n + 1))


# ---- learned from a training split -----------------------------------------------------------
@dataclass
class WordAssociations:
    """For each question word, how much more often than their base rate the training patterns
    that use it ask for each relation (lift, 0..1): "direct" -> ``directed_by``."""

    lift: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def from_patterns(cls, patterns: Mapping[str, RelationPath], min_patterns: int = 2) -> WordAssociations:
        word_count: Counter[str] = Counter()
        pair_count: dict[str, Counter[str]] = defaultdict(Counter)
        relation_count: Counter[str] = Counter()
        for pattern, path in patterns.items():
            relations = {s.relation for s in path}
            relation_count.update(relations)
            for word in set(question_words(pattern)):
                word_count[word] += 1
                pair_count[word].update(relations)
        total = len(patterns) or 1
        lift: dict[str, dict[str, float]] = {}
        for word, n in word_count.items():
            if n < min_patterns:
                continue
            for relation, together in pair_count[word].items():
                base = relation_count[relation] / total
                # shrunk towards the base rate: a word of few patterns says little
                share = (together + SHRINK * base) / (n + SHRINK)
                value = LEARNED_WEIGHT * (share - base) / (1 - base) if base < 1 else 0.0
                if value > 0:
                    lift.setdefault(word, {})[relation] = value
        return cls(lift)

    def get(self, word: str, relation: str) -> float:
        return self.lift.get(word, {}).get(relation, 0.0)


class VocabularyMap:
    """What a training split's wording says about a question worded otherwise, by sentence
    embeddings. Words it never used -> the training word they embed closest to, when close
    enough (cosine >= ``min_cosine``) and clearly closest (ahead of the runner-up by
    ``margin``): "penned" -> "wrote", "kinds" -> "types"; loose single-word neighbours
    ("filmmakers" ~ "films") stay unmapped. And for a question with such words, the learned
    paths of the training questions it reads most like (:meth:`similar_paths`): "who helmed
    the picture <e>" reads like "who directed the movie <e>" although no word maps."""

    def __init__(self, patterns: Mapping[str, RelationPath], encoder: Encoder, min_cosine: float = 0.6,
                 margin: float = 0.05) -> None:
        self.patterns = dict(patterns)
        self.vocabulary = sorted({w for p in patterns for w in _WORDS.findall(p) if w not in STOPWORDS})
        self._known = set(self.vocabulary)
        self.encoder, self.min_cosine, self.margin = encoder, min_cosine, margin
        self._vectors: Any = None
        self._pattern_vectors: Any = None
        self._mapped: dict[str, str | None] = {}

    def _new(self, word: str) -> bool:
        """A content word the training split never used."""
        return word not in self._known and word not in STOPWORDS and not word.isdigit() and word != "e"

    def unseen(self, pattern: str, relation_words: Iterable[str] = ()) -> list[str]:
        """The question's words that neither the training split nor a relation name knows
        ("helmed"; not "direct", which names directed_by although training never wrote it)."""
        named = set(relation_words)
        return [w for w in _WORDS.findall(pattern)
                if self._new(w) and not any(word_similarity(w, r) > 0 for r in named)]

    def similar_paths(self, pattern: str, weight: float = 1.0) -> dict[RelationPath, float]:
        """path -> ``weight * SIMILAR_WEIGHT``, decaying by how much less like the question its
        most similar training pattern reads than the most similar of all."""
        texts = list(self.patterns)
        if not texts:
            return {}
        if self._pattern_vectors is None:
            self._pattern_vectors = self.encoder([t.replace("<e>", "it") for t in texts])
        scores = self._pattern_vectors @ self.encoder([pattern.replace("<e>", "it")])[0]
        best: dict[RelationPath, float] = {}
        for text, score in zip(texts, scores, strict=True):
            path = self.patterns[text]
            best[path] = max(best.get(path, -1.0), float(score))
        top = max(best.values())
        return {path: weight * SIMILAR_WEIGHT * math.exp((score - top) / SIMILAR_SPREAD)
                for path, score in best.items()}

    def nearest(self, word: str) -> str | None:
        if word not in self._mapped:
            if self._vectors is None:
                self._vectors = self.encoder(self.vocabulary)
            scores = self._vectors @ self.encoder([word])[0]
            order = scores.argsort()[::-1]
            best = float(scores[order[0]])
            runner_up = float(scores[order[1]]) if len(order) > 1 else -1.0
            self._mapped[word] = (self.vocabulary[order[0]]
                                  if best >= self.min_cosine and best - runner_up >= self.margin else None)
        return self._mapped[word]

    def rewrite(self, pattern: str) -> tuple[str, list[tuple[str, str]]]:
        """The pattern with its unseen words mapped, and the (word, mapped to) pairs."""
        if not self.vocabulary:
            return pattern, []
        swaps: list[tuple[str, str]] = []

        def swap(match: re.Match[str]) -> str:
            word = match.group(0)
            if not self._new(word):
                return word
            found = self.nearest(word)
            if found is None:
                return word
            swaps.append((word, found))
            return found

        return _WORDS.sub(swap, pattern), swaps


_WORDS = re.compile(r"(?<![<\w])[a-z0-9][a-z0-9'-]*(?![\w>])")


# ---- the ranking ------------------------------------------------------------------------------
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

    def rank(self, pattern: str, topic: str, source: StepSource, k: int = 5,
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
                steps = source.steps(prefix.frontier[: self.frontier_cap])
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
                reached = source.follow(prefix.frontier[: self.frontier_cap], prefix.path[-1]) - {topic}
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
        if not seen and any(_named(question, form, taken) for form in cues.verbatim):
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
    total, matched = 0.0, {}
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


_BETWEEN_NOUN_AND_TOPIC = word_set("is are was were of does do did has have 's")


def expected_direction(question: QuestionCues, cues: RelationCues, used: Iterable[int]) -> bool | None:
    """Whether the question asks for the relation's subject (True: follow it backwards from
    the topic) or its object (False), from the word order around the words naming it; None
    without a cue (no named word, or no topic position)."""
    positions = sorted(used)
    if not positions or question.anchor is None:
        return None
    tokens, anchor = question.tokens, question.anchor
    cue, last = positions[0], positions[-1]
    topic_first = anchor < cue
    whose = "whose" in tokens[max(0, cue - 2):cue]
    after_cue = tokens[last + 1] if last + 1 < len(tokens) else ""
    possessive = tokens[anchor + 1:anchor + 2] == ["s"]  # "<e>'s" tokenises as <e>, s
    of_topic = not topic_first and "of" in tokens[last + 1:anchor]
    passive = after_cue == "by" and tokens[last].endswith("ed")
    if cues.reading == Reading.NOUN_OF and not cues.opaque:  # h is the r of t
        # "whose aunt is <e>", "<e> is the aunt of whom": <e> is the subject (forwards);
        # "the aunt of <e>", "<e>'s aunt": the answer is (backwards)
        return not (whose or (topic_first and not possessive))
    if cues.reading == Reading.ATTRIBUTE and not cues.opaque:  # t is the r of h
        if whose or (topic_first and any(t in ("as", "with") for t in tokens[anchor:cue])):
            forward = False  # "whose genre is <e>", "which films have <e> as genre"
        elif topic_first or possessive or of_topic:
            forward = True  # "<e>'s genre", "the genre of <e>", "what does <e> affect"
        else:  # "what genre is <e>" (a copula between), "what affects <e>" (a verb: <e> its object)
            forward = any(t in _BETWEEN_NOUN_AND_TOPIC for t in tokens[last + 1:anchor])
        if passive:  # "what is affected by <e>"
            forward = not forward
        return not forward
    # a verb (h r t) or an opaque code, read in the question's order: the active voice of an
    # "r by" relation ("who directed <e>") reverses it; "the r of <e>" reads as <e>'s r
    if whose or (topic_first and "as" in tokens[anchor:cue]):
        return True  # "whose r is <e>", "what has <e> as its r"
    forward = topic_first or of_topic
    if cues.by_verb and after_cue != "by" and not of_topic:
        forward = not forward
    elif cues.by_verb and of_topic:  # "the director of <e>": <e> directed_by ?
        forward = True
    return not forward
