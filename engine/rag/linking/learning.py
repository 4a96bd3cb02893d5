"""Learning relation paths from a training split (``--train FILE``, repeatable: a BRINK
``questions_train.jsonl`` or a MetaQA ``qa_*.txt``, read once per answerer:
:func:`read_training_split`).

For each training question every path of the allowed lengths from its topic is followed on
the graph in memory, and the paths whose reached set meets the gold answers are scored by
precision and recall; a question *pattern* (its text with the topic mention replaced by
``<E>``) gets the path with the best mean F1 over its questions (:func:`learn_patterns`). A
one-step path may also count the answers the answerer's rules derive for that step, so that
on an incomplete KG (BRINK) a question still learns the relation it asks about although its
direct triple is gone.

Learning reads only the training file (text, topic, answers) and the answered graph; the
learned model (:class:`PathModel`) is cached (:mod:`kgengine.artifacts`) per graph load,
training files' content and settings."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgengine.artifacts import Artifact, ArtifactCache, content_key, file_digest, graph_stamp
from kgengine.mining.io import MinedRule
from kgengine.questions import read_training
from kgengine.rag.graph.steps import RelationPath, Step, format_path, parse_path
from kgengine.rag.graph.view import GraphView
from kgengine.rag.linking.classifier import PathClassifier
from kgengine.rag.linking.patterns import PatternIndex, pattern_of
from kgengine.rag.rules import RuleSet
from kgengine.store import KGStore

MODEL_VERSION = 1


# ---- the training split, read once -------------------------------------------------------------
@dataclass(frozen=True)
class TrainingQuestion:
    """One training question whose topic and (some) answers are in the graph."""

    text: str
    written: str  # the topic as the file writes it (its mention in the text)
    pattern: str
    topic: str
    answers: frozenset[str]
    hops: int | None = None  # the path length to search (MetaQA: the N-hop folder), else any


@dataclass(frozen=True)
class TrainingSplit:
    sources: tuple[str, ...]
    questions: tuple[TrainingQuestion, ...]  # file order
    read: int  # questions in the files
    skipped: int  # topic or answers not in the graph

    def per_pattern(self, limit: int) -> list[TrainingQuestion]:
        """The first ``limit`` questions of each pattern, in file order."""
        seen: Counter[str] = Counter()
        out = []
        for q in self.questions:
            if seen[q.pattern] < limit:
                seen[q.pattern] += 1
                out.append(q)
        return out


def read_training_split(paths: Sequence[Path], resolve: Callable[[str], str | None]) -> TrainingSplit:
    """The training files' questions with topic and answers resolved to entity ids of the
    graph (``resolve``: a surface form — id, private id or label — to an id, or None)."""
    kept: list[TrainingQuestion] = []
    read = 0
    for path in paths:
        for q in read_training(path):
            read += 1
            written = q.question.topic_entity or ""
            topic = resolve(written)
            answers = frozenset(a for a in map(resolve, q.answers) if a is not None)
            if topic is None or not answers:
                continue
            kept.append(TrainingQuestion(q.question.text, written, pattern_of(q.question.text, written),
                                         topic, answers, q.hops))
    return TrainingSplit(tuple(str(p) for p in paths), tuple(kept), read, read - len(kept))


# ---- patterns -> paths -----------------------------------------------------------------------
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
    view: GraphView,
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
        if len(by_pattern[example.pattern]) < per_pattern and view.has_entity(example.topic):
            by_pattern[example.pattern].append(example)
    all_steps = sorted(Step(r, inverse) for r in view.relations() for inverse in (False, True))
    learned: dict[str, PatternPath] = {}
    for pattern, items in by_pattern.items():
        totals: dict[RelationPath, float] = defaultdict(float)
        for example in items:
            lengths = [example.hops] if example.hops else list(range(1, max_hops + 1))
            reached = view.paths_from(example.topic, lengths, frontier_cap)
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


@dataclass
class PathModel:
    """Patterns learned from training questions, and the index of their texts."""

    patterns: dict[str, PatternPath]
    sources: list[str]
    questions: int = 0
    skipped: int = 0  # training questions whose topic or answers are not in the graph
    index: PatternIndex = field(init=False)
    classifier: PathClassifier = field(init=False)

    def __post_init__(self) -> None:
        self.index = PatternIndex(self.patterns)
        self.classifier = PathClassifier(self.paths)

    @property
    def paths(self) -> dict[str, RelationPath]:
        """pattern -> its learned path."""
        return {p: v.path for p, v in self.patterns.items()}

    def to_json(self) -> dict[str, Any]:
        return {"version": MODEL_VERSION, "sources": self.sources, "questions": self.questions,
                "skipped": self.skipped,
                "patterns": {p: {"path": format_path(v.path), "score": v.score, "examples": v.examples,
                                 "alternatives": [[format_path(a), s] for a, s in v.alternatives]}
                             for p, v in self.patterns.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PathModel:
        patterns = {p: PatternPath(parse_path(v["path"]), v["score"], v["examples"],
                                   [(parse_path(a), s) for a, s in v["alternatives"]])
                    for p, v in data["patterns"].items()}
        return cls(patterns, data["sources"], data["questions"], data["skipped"])


def learn_model(
    store: KGStore,
    graph: str,
    train_paths: Sequence[Path],
    view: Callable[[], GraphView],
    split: Callable[[], TrainingSplit],
    rules: RuleSet | None = None,
    min_rule_confidence: float = 0.5,
    max_hops: int = 3,
    cache_dir: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> PathModel:
    """Learn (or read from the cache, :mod:`kgengine.artifacts` kind ``paths``) the pattern ->
    path model of ``train_paths`` on ``graph``. ``view`` gives the graph in memory and
    ``split`` the training questions (called only when learning: a cached model needs
    neither); ``cache_dir``: the cache root instead of the default one."""

    def learn() -> PathModel:
        return _learn(train_paths, view, split, rules, min_rule_confidence, max_hops, progress)

    # the rules by content: "mined on first use" and "mined earlier" are the same rules
    key = content_key(training_key(store, graph, train_paths), str(max_hops), str(min_rule_confidence),
                      rules.fingerprint if rules else "no rules")
    return ArtifactCache(cache_dir).load_or_build(LEARNED_PATHS, key, learn, label=graph).value


def _learn(train_paths: Sequence[Path], view: Callable[[], GraphView], split: Callable[[], TrainingSplit],
           rules: RuleSet | None, min_rule_confidence: float, max_hops: int,
           progress: Callable[[int], None] | None) -> PathModel:
    training = split()
    examples = [Example(q.pattern, q.topic, q.answers, q.hops) for q in training.questions]
    graph_in_memory = view()
    rule_reach = None
    if rules is not None and rules.rules:
        by_step: dict[Step, list[MinedRule]] = {}

        def rule_reach(topic: str, step: Step) -> set[str]:
            chosen = by_step.get(step)
            if chosen is None:
                chosen = by_step[step] = [r for r in rules.for_step(step)
                                          if r.pca_confidence >= min_rule_confidence]
            found: set[str] = set()
            for mined in chosen:
                found |= graph_in_memory.rule_reach(mined.rule, topic, step.inverse)
            return found

    learned = learn_patterns(graph_in_memory, examples, max_hops=max_hops, rule_reach=rule_reach,
                             progress=progress)
    return PathModel(learned, [str(p) for p in train_paths], training.read, training.skipped)


def training_key(store: KGStore, graph: str, train_paths: Sequence[Path]) -> str:
    """What is learned on ``train_paths`` over ``graph`` depends on, for cache keys: the graph
    as loaded now and each training file's content (not its path or modification time)."""
    return content_key(graph_stamp(store, graph), *(file_digest(p) for p in train_paths))


def _read_model(path: Path) -> PathModel:
    try:
        return PathModel.from_json(json.loads(path.read_text(encoding="utf-8")))
    except TypeError as exc:  # a file of another shape
        raise ValueError(str(exc)) from exc


def _write_model(model: PathModel, path: Path) -> None:
    path.write_text(json.dumps(model.to_json()), encoding="utf-8")


LEARNED_PATHS: Artifact[PathModel] = Artifact("paths", MODEL_VERSION, ".json", write=_write_model,
                                              read=_read_model)
