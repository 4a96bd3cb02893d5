"""Relation paths and how they are learned (pure: no store, no files, no model).

A *relation path* is a sequence of steps from the topic entity, each a relation followed
forwards (``directed_by``: topic -> object) or backwards (``^starred_actors``: topic <- subject).
Following a path never revisits the topic at a middle hop and never answers the topic itself
(MetaQA's gold answers exclude it: "co-directors of X" are not X).

Learning (``learn_patterns``): for each training question, every path of the allowed lengths
from its topic is followed on an in-memory :class:`GraphAdjacency` of the answered KG, and the paths
whose reached set meets the gold answers are scored by precision and recall; a question
*pattern* (its text with the topic mention replaced by ``<E>``) gets the path with the best mean
F1 over its questions. A one-step path may also count the answers that the answerer's rules
derive for that step (``rule_reach``), so that on an incomplete KG (BRINK) a question still
learns the relation it asks about although its direct triple is gone.

Nearest patterns (``PatternIndex``): TF-IDF cosine over word unigrams, word bigrams and
character trigrams of the patterns, so an unseen wording finds the known pattern that shares
its rarest words."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from kgengine.mining.rules import Atom, Rule, is_variable
from kgengine.model import Triple

PLACEHOLDER = "<E>"
INVERSE_MARK = "^"


class Step(NamedTuple):
    relation: str
    inverse: bool = False  # True: follow the relation from its object to its subject

    def __str__(self) -> str:
        return (INVERSE_MARK if self.inverse else "") + self.relation


RelationPath = tuple[Step, ...]


def format_path(path: Sequence[Step]) -> list[str]:
    """``[directed_by, ^starred_actors]`` (``^`` = inverse)."""
    return [str(step) for step in path]


def parse_step(text: str) -> Step:
    text = text.strip()
    if text.startswith(INVERSE_MARK):
        return Step(text[1:], True)
    return Step(text, False)


def parse_path(items: Iterable[str]) -> RelationPath:
    return tuple(parse_step(item) for item in items)


_NONE: frozenset[str] = frozenset()  # (neighbours' empty answer: never to be changed)


class GraphAdjacency:
    """The KG as ``entity -> step -> neighbours`` for both directions, built once in memory
    (MetaQA's 130k triples take about 1 s and 60 MB)."""

    def __init__(self, triples: Iterable[Triple]) -> None:
        self._next: dict[str, dict[Step, set[str]]] = defaultdict(dict)
        self.relations: set[str] = set()
        for head, relation, tail in triples:
            self._next[head].setdefault(Step(relation, False), set()).add(tail)
            self._next[tail].setdefault(Step(relation, True), set()).add(head)
            self.relations.add(relation)

    def __contains__(self, entity: str) -> bool:
        return entity in self._next

    def steps(self, entity: str) -> Mapping[Step, set[str]]:
        return self._next.get(entity, {})

    def neighbours(self, entity: str, step: Step) -> AbstractSet[str]:
        steps = self._next.get(entity)
        return steps.get(step, _NONE) if steps is not None else _NONE

    def step_from(self, entities: Iterable[str], step: Step) -> set[str]:
        """Every neighbour over ``step`` of any of ``entities``."""
        reached: set[str] = set()
        for entity in entities:
            steps = self._next.get(entity)
            if steps is not None:
                reached |= steps.get(step, _NONE)
        return reached

    def has_fact(self, head: str, relation: str, tail: str) -> bool:
        return tail in self.neighbours(head, Step(relation, False))


def reach(adjacency: GraphAdjacency, topic: str, path: Sequence[Step]) -> set[str]:
    """Entities at the end of ``path`` from ``topic`` (the topic excluded at every hop)."""
    frontier = {topic}
    for step in path:
        frontier = {n for e in frontier for n in adjacency.neighbours(e, step)} - {topic}
        if not frontier:
            break
    return frontier


def enumerate_paths(
    adjacency: GraphAdjacency, topic: str, lengths: Sequence[int], frontier_cap: int = 5_000
) -> dict[RelationPath, set[str]]:
    """Every path whose length is in ``lengths`` (1-3) with a non-empty end set from
    ``topic``. A frontier larger than ``frontier_cap`` is not expanded further (a path through
    a hub such as the genre Drama reaches most of the KG and could never be precise)."""
    longest = max(lengths)
    out: dict[RelationPath, set[str]] = {}

    def walk(prefix: RelationPath, frontier: set[str]) -> None:
        if len(prefix) in lengths:
            out[prefix] = frontier
        if len(prefix) == longest or len(frontier) > frontier_cap:
            return
        by_step: dict[Step, set[str]] = defaultdict(set)
        for entity in frontier:
            for step, neighbours in adjacency.steps(entity).items():
                by_step[step].update(neighbours)
        for step in sorted(by_step):
            reached = by_step[step]
            reached.discard(topic)
            if reached:
                walk((*prefix, step), reached)

    walk((), {topic})
    return out


# ---- rules evaluated in memory (learning, calibration, a batch; one question: store queries) -
def body_answers(adjacency: GraphAdjacency, rule: Rule, topic: str, inverse: bool) -> set[str]:
    """The other head argument of ``rule`` for every grounding of its body with the topic
    bound to the head's subject (``inverse`` False) or object (True)."""
    bound_var, free_var = (rule.head.object, rule.head.subject) if inverse else (
        rule.head.subject, rule.head.object)
    if not (is_variable(bound_var) and is_variable(free_var)) or bound_var == free_var:
        return set()
    hops = _chain(tuple(rule.body), bound_var, free_var)
    if hops is not None:  # a path of variables: its ends by set unions, no rows
        frontier: set[str] = {topic}
        for steps in hops:
            if len(steps) == 1:
                frontier = adjacency.step_from(frontier, steps[0])
            else:
                frontier = {e for v in frontier for e in set.intersection(
                    *(set(adjacency.neighbours(v, s)) for s in steps))}
        return frontier - {topic}
    columns, rows = body_groundings(adjacency, rule.body, {bound_var: topic})
    if free_var not in columns:
        return set()
    at = columns.index(free_var)
    return {row[at] for row in rows} - {topic}


@lru_cache(maxsize=8192)
def _chain(atoms: tuple[Atom, ...], start: str, end: str) -> tuple[tuple[Step, ...], ...] | None:
    """The body as hops start -> v1 -> ... -> end when it is a path of distinct variables
    (each hop one or more atoms between the same two variables), else None."""
    hops: list[tuple[Step, ...]] = []
    current, seen, remaining = start, {start}, list(atoms)
    while remaining:
        touching = [a for a in remaining if current in (a.subject, a.object)]
        if not touching or not all(is_variable(t) for a in touching for t in a.terms):
            return None
        following = {a.object if a.subject == current else a.subject for a in touching}
        if len(following) != 1 or following & seen:
            return None
        hops.append(tuple(Step(a.relation, a.subject != current) for a in touching))
        remaining = [a for a in remaining if a not in touching]
        current = following.pop()
        seen.add(current)
    return tuple(hops) if current == end and hops else None


def body_groundings(adjacency: GraphAdjacency, atoms: Sequence[Atom], binding: Mapping[str, str]
                    ) -> tuple[list[str], list[tuple[str, ...]]]:
    """Every substitution extending ``binding`` that makes each atom a fact (as the
    ``rule_groundings`` query, which also lets two atoms match the same fact), each once, as
    (variables, rows of their values); no rows when an atom is not connected to anything
    bound (not a rule the miner writes). The atoms are joined in an order where each has a
    bound argument when reached, all partial rows a level at a time, as tuples (bodies are
    short, and calibration runs thousands of them)."""
    columns = list(binding)
    rows: list[tuple[str, ...]] = [tuple(binding.values())]
    pending = list(atoms)
    while pending and rows:
        index = next((i for i, a in enumerate(pending)
                      if not (is_variable(a.subject) and a.subject not in columns)
                      or not (is_variable(a.object) and a.object not in columns)), None)
        if index is None:
            return columns, []
        atom = pending.pop(index)
        forward, backward = Step(atom.relation), Step(atom.relation, True)
        subject, obj = _slot(atom.subject, columns), _slot(atom.object, columns)
        neighbours = adjacency.neighbours
        if subject is not None and obj is not None:
            rows = [row for row in rows if _at(obj, row) in neighbours(_at(subject, row), forward)]
        elif subject is not None:
            columns.append(atom.object)
            rows = [(*row, tail) for row in rows for tail in neighbours(_at(subject, row), forward)]
        else:
            assert obj is not None
            columns.append(atom.subject)
            rows = [(*row, head) for row in rows for head in neighbours(_at(obj, row), backward)]
    return columns, rows if not pending else []


def _slot(term: str, columns: list[str]) -> int | str | None:
    """Where a term's value is: a column index, the constant itself, or None (unbound)."""
    if not is_variable(term):
        return term
    return columns.index(term) if term in columns else None


def _at(slot: int | str, row: tuple[str, ...]) -> str:
    return row[slot] if isinstance(slot, int) else slot


# ---- patterns --------------------------------------------------------------------------------
_SPACE = re.compile(r"\s+")
_BRACKET = re.compile(r"\[([^\[\]]+)\]")


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text.strip().lower())


def find_mention(text: str, mention: str) -> int:
    """Start of ``mention`` in ``text`` as a whole token (case-blind), or -1."""
    haystack, needle = text.casefold(), mention.casefold()
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        before = haystack[start - 1] if start else " "
        after = haystack[end] if end < len(haystack) else " "
        if not _word(before) and not _word(after):
            return start
        start = haystack.find(needle, start + 1)
    return -1


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def pattern_of(text: str, mention: str | None) -> str:
    """The question with its topic mention replaced by ``<E>``, lower-cased, spaces collapsed:
    a ``[bracketed]`` mention (MetaQA) or the mention's first whole-token occurrence."""
    bracket = _BRACKET.search(text)
    if bracket is not None and (mention is None or bracket.group(1).casefold() == mention.casefold()):
        return normalise(text[:bracket.start()] + PLACEHOLDER + text[bracket.end():])
    if mention:
        start = find_mention(text, mention)
        if start != -1:
            return normalise(text[:start] + PLACEHOLDER + text[start + len(mention):])
    return normalise(text)


# ---- learning --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    """One training question: its pattern, topic entity and gold answers (entity ids)."""

    pattern: str
    topic: str
    answers: frozenset[str]
    hops: int | None = None  # the path length to search (MetaQA: the N-hop folder), else any


@dataclass
class PatternPath:
    """What was learned for one pattern: the best path, its mean F1 over the pattern's
    questions (``score``), and how many questions it was learned from."""

    path: RelationPath
    score: float
    examples: int
    alternatives: list[tuple[RelationPath, float]] = field(default_factory=list)


RuleReach = Callable[[str, Step], set[str]]


def score_example(reached: set[str], gold: frozenset[str]) -> float:
    hits = len(reached & gold)
    return 2 * hits / (len(reached) + len(gold)) if hits else 0.0


def learn_patterns(
    adjacency: GraphAdjacency,
    examples: Sequence[Example],
    max_hops: int = 3,
    per_pattern: int = 25,
    rule_reach: RuleReach | None = None,
    frontier_cap: int = 5_000,
    progress: Callable[[int], None] | None = None,
) -> dict[str, PatternPath]:
    """pattern -> best path. At most ``per_pattern`` questions per pattern are searched (the
    first ones in file order: templates repeat, and 25 agree as well as 2,000 do). A path's
    per-question score is F1(reached, gold); its pattern score the mean over the pattern's
    searched questions (0 where it reaches nothing); ties go to the shorter path, then to
    the path's text. Questions whose topic is not in the KG are skipped."""
    by_pattern: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        if len(by_pattern[example.pattern]) < per_pattern and example.topic in adjacency:
            by_pattern[example.pattern].append(example)
    all_steps = sorted(Step(r, inverse) for r in adjacency.relations for inverse in (False, True))
    learned: dict[str, PatternPath] = {}
    for pattern, items in by_pattern.items():
        totals: Counter[RelationPath] = Counter()
        for example in items:
            lengths = [example.hops] if example.hops else list(range(1, max_hops + 1))
            reached = enumerate_paths(adjacency, example.topic, lengths, frontier_cap)
            scores = {path: score_example(ends, example.answers) for path, ends in reached.items()}
            if rule_reach is not None and 1 in lengths:
                # a step scores as the better of its direct answers and those plus its rules'
                # (the answerer's cut decides later); rules may derive a step the topic has no
                # edge for, so every relation is tried, both ways
                for step in all_steps:
                    extra = rule_reach(example.topic, step)
                    if extra:
                        with_rules = score_example(reached.get((step,), set()) | extra, example.answers)
                        scores[(step,)] = max(scores.get((step,), 0.0), with_rules)
            for path, value in scores.items():
                if value:
                    totals[path] += value
            if progress is not None:
                progress(1)
        if not totals:
            continue
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], len(kv[0]), format_path(kv[0])))
        best, total = ranked[0]
        learned[pattern] = PatternPath(best, total / len(items), len(items),
                                       [(p, s / len(items)) for p, s in ranked[1:4]])
    return learned


# ---- nearest patterns ------------------------------------------------------------------------
def features(pattern: str) -> Counter[str]:
    """Word unigrams and bigrams and character trigrams of a pattern (``<E>`` kept as a word,
    so its position counts)."""
    words = re.findall(r"<e>|[a-z0-9]+", pattern.lower())
    out: Counter[str] = Counter()
    out.update(f"w:{w}" for w in words)
    out.update(f"b:{a} {b}" for a, b in zip(words, words[1:], strict=False))
    for w in words:
        if w == "<e>":
            continue
        padded = f"#{w}#"
        out.update(f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2))
    return out


class PatternIndex:
    """TF-IDF cosine similarity between a pattern and the known ones."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = list(dict.fromkeys(patterns))
        counts = [features(p) for p in self.patterns]
        document_frequency: Counter[str] = Counter()
        for c in counts:
            document_frequency.update(c.keys())
        n = len(self.patterns)
        self._idf = {f: math.log((1 + n) / (1 + df)) + 1.0 for f, df in document_frequency.items()}
        self._postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for i, c in enumerate(counts):
            vector = self._vector(c)
            for f, w in vector.items():
                self._postings[f].append((i, w))

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        weights = {f: (1 + math.log(n)) * self._idf.get(f, 0.0) for f, n in counts.items()}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {f: w / norm for f, w in weights.items() if w}

    def nearest(self, pattern: str, k: int = 5) -> list[tuple[str, float]]:
        scores: dict[int, float] = defaultdict(float)
        for f, w in self._vector(features(pattern)).items():
            for i, v in self._postings.get(f, ()):
                scores[i] += w * v
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], self.patterns[kv[0]]))[:k]
        return [(self.patterns[i], s) for i, s in ranked]


# ---- zero-shot: question words against relation names ---------------------------------------
_STOPWORD_TEXT = (
    "a an the of is are was were be been who whom whose what which when where why how did do "
    "does in on at to for by with as and or that this these those it its has have had from "
    "<e> e me my your their his her they them there than then also any some all"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def relation_words(name: str, label: str | None = None) -> list[str]:
    """Words of a relation name (``/film/film/directed_by``, ``hasGenre``, ``P57``) and label."""
    text = _CAMEL.sub(" ", name) + " " + (label or "")
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS]


def question_words(pattern: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", pattern.lower().replace(PLACEHOLDER.lower(), " "))
            if w not in STOPWORDS]


# word families the common-prefix rule misses (irregular verbs, "acted" ~ "actors") -> one
# stem, so "wrote" meets "written_by"
_WORD_FAMILIES = {form: stem for stem, forms in {
    "writ": "write wrote written writes writer writers screenwriter screenwriters",
    "sing": "sang sung sings", "win": "won wins winning",
    "make": "made makes", "give": "gave given gives", "take": "took taken takes",
    "speak": "spoke spoken speaks", "begin": "began begun begins", "born": "bore borne birth",
    "lead": "led leads", "teach": "taught", "buy": "bought", "think": "thought", "drive": "drove driven",
    "grow": "grew grown", "know": "knew known", "draw": "drew drawn", "fly": "flew flown",
    "choose": "chose chosen", "build": "built", "sell": "sold", "tell": "told",
    "act": "acted acts actor actors",
}.items() for form in (stem, *forms.split())}


def word_similarity(a: str, b: str) -> float:
    """1 for equal words (or of one word family: "wrote" ~ "written"), else the share
    of the shorter word in a common prefix of at least four characters ("directed" ~
    "director", "starred" ~ "starring"), else 0."""
    if a == b or (a in _WORD_FAMILIES and _WORD_FAMILIES[a] == _WORD_FAMILIES.get(b)):
        return 1.0
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common / max(len(a), len(b)) if common >= 4 else 0.0


def lexical_relation_score(question: Sequence[str], relation: Sequence[str]) -> float:
    """Mean over the relation's words of their best match among the question's words."""
    if not relation or not question:
        return 0.0
    return sum(max(word_similarity(r, q) for q in question) for r in relation) / len(relation)


# ---- unseen patterns, compositionally -----------------------------------------------------
def slot_features(pattern: str) -> Counter[str]:
    """:func:`features` plus each word tagged with its side of ``<e>`` and whether it is
    within three words of it: the words next to the topic name the first hop ("whose writers
    also wrote <e>"), those far from it the answer ("who are the directors of ...")."""
    out = features(pattern)
    words = re.findall(r"<e>|[a-z0-9]+", pattern.lower())
    if "<e>" in words:
        anchor = words.index("<e>")
        for i, w in enumerate(words):
            if i != anchor:
                side = "L" if i < anchor else "R"
                near = "n" if abs(i - anchor) <= 3 else "f"
                out[f"p:{side}{near}:{w}"] += 1
    return out


class PathClassifier:
    """Multinomial naive Bayes over pattern features (:func:`slot_features`) for each *slot* of
    a relation path — its length, first step, last step and (three hops) middle step —
    trained on the learned patterns, one vote each. An unseen wording that mixes known parts
    ("the movies that share *actors* with <e> were in which *languages*") gets the path whose
    slots its words predict, even when no known pattern has that combination; a whole-pattern
    nearest neighbour would copy the path of the most similar wording instead (writers, say).

    A path's score is the sum of its slots' log posteriors; candidates are the learned paths
    and the combinations of each slot's three likeliest steps."""

    SLOTS = ("length", "first", "middle", "last")

    def __init__(self, learned: Mapping[str, RelationPath], alpha: float = 0.1) -> None:
        self.alpha = alpha
        self.paths = sorted(set(learned.values()), key=lambda p: (len(p), format_path(p)))
        self._counts: dict[str, dict[str, Counter[str]]] = {s: defaultdict(Counter) for s in self.SLOTS}
        self._priors: dict[str, Counter[str]] = {s: Counter() for s in self.SLOTS}
        self._vocabulary: set[str] = set()
        for pattern, path in learned.items():
            if not path:
                continue
            counts = slot_features(pattern)
            self._vocabulary.update(counts)
            for slot, label in self._labels(path).items():
                self._priors[slot][label] += 1
                self._counts[slot][label].update(counts)
        self._totals = {slot: {label: sum(c.values()) for label, c in self._counts[slot].items()}
                        for slot in self.SLOTS}

    @staticmethod
    def _labels(path: RelationPath) -> dict[str, str]:
        labels = {"length": str(len(path)), "first": str(path[0]), "last": str(path[-1])}
        if len(path) == 3:
            labels["middle"] = str(path[1])
        return labels

    def posteriors(self, pattern: str, slot: str) -> dict[str, float]:
        """label -> log posterior (normalised) of one slot."""
        counts = slot_features(pattern)
        known = {f: n for f, n in counts.items() if f in self._vocabulary}
        size = len(self._vocabulary) or 1
        scores: dict[str, float] = {}
        total_prior = sum(self._priors[slot].values())
        for label, prior in self._priors[slot].items():
            label_counts, label_total = self._counts[slot][label], self._totals[slot][label]
            denominator = math.log(label_total + self.alpha * size)
            scores[label] = math.log(prior / total_prior) + sum(
                n * (math.log(label_counts.get(f, 0) + self.alpha) - denominator) for f, n in known.items())
        if not scores:
            return {}
        top = max(scores.values())
        norm = top + math.log(sum(math.exp(v - top) for v in scores.values()))
        return {label: v - norm for label, v in scores.items()}

    def slot_probabilities(self, pattern: str) -> Callable[[RelationPath], dict[str, float]]:
        """``path -> {slot: posterior probability of the path's label}`` for ``pattern``."""
        post = {slot: self.posteriors(pattern, slot) for slot in self.SLOTS}

        def probabilities(path: RelationPath) -> dict[str, float]:
            if not path:
                return {}
            return {slot: math.exp(post[slot][label]) if label in post[slot] else 0.0
                    for slot, label in self._labels(path).items()}

        return probabilities

    def rank(self, pattern: str, k: int = 5) -> list[tuple[RelationPath, float]]:
        """The ``k`` likeliest paths with their scores (sums of log posteriors), best first."""
        if not self.paths:
            return []
        post = {slot: self.posteriors(pattern, slot) for slot in self.SLOTS}

        def top(slot: str, n: int = 3) -> list[Step]:
            return [parse_step(label) for label, _ in sorted(post[slot].items(), key=lambda kv: -kv[1])[:n]]

        candidates: set[RelationPath] = set(self.paths)
        for length in (int(label) for label in post["length"]):
            if length == 1:
                candidates.update((s,) for s in top("first"))
            elif length == 2:
                candidates.update((a, b) for a in top("first") for b in top("last"))
            else:
                candidates.update((a, m, b) for a in top("first") for m in top("middle") for b in top("last"))
        floor = math.log(1e-9)

        def score(path: RelationPath) -> float:
            return sum(post[slot].get(label, floor) for slot, label in self._labels(path).items())

        ranked = sorted(candidates, key=lambda p: (-score(p), len(p), format_path(p)))
        return [(p, score(p)) for p in ranked[:k]]
