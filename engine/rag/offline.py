"""The offline answerer (no LLM): linked relation path + rule-guided candidates.

1. The topic is linked (:mod:`kgengine.rag.linking.entities`), the question to a relation
   path (a :class:`kgengine.rag.linking.linker.RelationLinker`).
2. *Direct answers*: the path is followed from the topic on the answerer's
   :class:`~kgengine.rag.graph.view.GraphView` (the topic is never revisited at a middle hop
   nor answered). Each gets score 1.
   When neither the path nor its rules find anything (a KB lacking an edge, a prediction
   about films for a person), the linked pattern's alternative paths are tried in turn (a
   learned pattern's next-best paths; an unseen pattern's next likeliest predictions), then
   the zero-shot path; the reasoning says which was used.
3. *Rule-guided answers* (one-relation paths): every mined rule whose head is that relation is
   run from the topic (:mod:`kgengine.rag.rules`); a candidate's score is the noisy-or of the
   PCA confidences of the distinct rules that derive it, ``1 - prod(1 - conf)``.
4. *Ranking and cut*: by score, direct answers first among equal scores (a rule of PCA
   confidence 1 also scores 1), then by the number of grounded paths found (more first), then
   by id. Rule-only candidates below the cut are dropped, so the answer set is a set of
   likely answers, not everything a weak rule reaches: the cut is ``min_score`` (0.5), or per
   relation and direction the one learned on the training split (:func:`calibrate`).

Methods: ``offline`` = direct + rules; ``rule-guided`` = the rules' candidates only, with the
direct path used only where no rule applies (multi-hop paths, or no rule for the relation).

Every answer carries its evidence: grounded paths from the topic, each with the rule (and its
PCA confidence) that turned it into the answer, or no rule for a direct path."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

from kgengine.artifacts import Artifact, ArtifactCache, content_key
from kgengine.errors import KGEngineError
from kgengine.mining.io import MinedRule
from kgengine.model import Question
from kgengine.rag.base import Answer, BaseAnswerer, Evidence, LinkedEntity, ScoredAnswer, Timings
from kgengine.rag.embeddings import LazyEncoder, embeddings_available
from kgengine.rag.graph.steps import RelationPath, Step, format_path, parse_step
from kgengine.rag.graph.view import GraphView, HandoverGraphView, follow_path, question_started
from kgengine.rag.linking.entities import GraphEntityLinker
from kgengine.rag.linking.learning import PathModel, TrainingQuestion, learn_model, training_key
from kgengine.rag.linking.linker import LearnedRelationLinker, RelationLinker, ZeroShotLinker
from kgengine.rag.linking.vocabulary import Encoder
from kgengine.rag.methods import MethodContext, MethodSpec, Need, Progress
from kgengine.rag.rules import RuleSet, noisy_or, rule_candidates, rule_scores

DIRECT_SCORE = 1.0


_TOPIC_SOURCES = {"topic entity": "given as the topic", "[bracket]": "the [bracketed] name",
                  "text match": "named in the question"}


def describe_topic(linked: LinkedEntity) -> str:
    """"topic entity e1147: given as the topic, matched by id" (and the words that name it
    in the question, when they differ from the id)."""
    source, _, kind = linked.how.partition(" (")
    text = f"topic entity {linked.id}: {_TOPIC_SOURCES.get(source, source)}"
    if kind:
        text += f", matched by {kind.rstrip(')')}"
    if linked.mention and linked.mention != linked.id:
        text += f", written {linked.mention!r}"
    return text


@dataclass
class OfflineAnswerer(BaseAnswerer):
    view: GraphView  # how the graph is read (kgengine.rag.methods.MethodContext.graph_view)
    entity_linker: GraphEntityLinker
    relation_linker: RelationLinker
    rules: RuleSet | None = None
    method: str = "offline"  # its registered name
    min_score: float = 0.5
    surface: Callable[[str], str] = str  # entity id -> the form written in raw_output
    labels: dict[str, str] | None = None  # entity id -> text label, for display
    evidence_per_answer: int = 3
    # per step, the cut learned on the training split (calibrate); min_score elsewhere
    thresholds: dict[Step, float] = field(default_factory=dict)
    rule_guided: bool = False  # the rules' candidates first; the direct path only where no rule applies

    def get_answer(self, question: Question, linked_entity: LinkedEntity | None, steps: Timings) -> Answer:
        assert linked_entity is not None  # needs_topic
        question_started(self.view)
        timings = steps.ms
        topic = linked_entity.id
        with steps.step("link_relation_ms"):
            linked = self.relation_linker.link(question.text, topic, linked_entity.mention)
        reasoning = [describe_topic(linked_entity), linked.describe()]
        learned_from = linked.learned_from
        path = linked.path
        candidates = self.candidates(topic, path, reasoning, timings)
        # the KB may lack an edge of the learned path (MetaQA's reconstructed KB, a removed
        # triple): then the pattern's next-best learned paths, while they score well enough
        for alternative, score in linked.alternatives:
            if candidates:
                break
            path = alternative
            what = "train F1" if linked.learned_from == "train" else "share of the nearest patterns' votes"
            reasoning.append(f"nothing found; trying the next-best path "
                             f"{' / '.join(format_path(path))} ({what} {score:.2f})")
            candidates = self.candidates(topic, path, reasoning, timings)
        if not candidates and linked.learned_from != "zero-shot":
            zero_shot = self.relation_linker.link_by_ranking(linked.pattern, topic)
            if zero_shot.path and zero_shot.path != path:
                path, learned_from = zero_shot.path, zero_shot.learned_from
                reasoning.append(f"nothing found; zero-shot: {zero_shot.describe()}")
                candidates = self.candidates(topic, path, reasoning, timings)
        return self.result(question, topic, path, learned_from, candidates, reasoning)

    def result(self, question: Question, topic: str, path: RelationPath, learned_from: str | None,
               candidates: dict[str, Candidate], reasoning: list[str]) -> Answer:
        """The answer from a path's candidates: ranked, cut (the cut said), written out."""
        threshold = self.threshold(path)
        answers = self.rank(candidates, threshold)
        dropped = len(candidates) - len(answers)
        if dropped:
            learned = " (cut learned on the training split)" if threshold != self.min_score else ""
            reasoning.append(f"dropped {dropped} rule-only candidates scoring below {threshold:g}{learned}")
        if answers:
            reasoning.append(f"answer: {', '.join(self.surface(a.id) for a in answers[:10])}"
                             + (" ..." if len(answers) > 10 else ""))
        return Answer(
            question=question.text, topic_entity=topic, method=self.method, answers=answers,
            relation_path=format_path(path), learned_from=learned_from,
            reasoning=reasoning, raw_output=", ".join(self.surface(a.id) for a in answers),
        )

    def threshold(self, path: RelationPath) -> float:
        return self.thresholds.get(path[0], self.min_score) if len(path) == 1 else self.min_score

    def candidates(self, topic: str, path: RelationPath, reasoning: list[str] | None = None,
                   timings: dict[str, float] | None = None) -> dict[str, Candidate]:
        """Direct answers of the path and rule-guided candidates, before ranking and cut."""
        reasoning = [] if reasoning is None else reasoning
        timings = {} if timings is None else timings
        candidates: dict[str, Candidate] = {}
        step_rules, use_direct = self._sources(path)
        mark = time.perf_counter()
        if use_direct and path:
            result = follow_path(self.view, topic, path, self.evidence_per_answer)
            for entity, paths in result.answers.items():
                c = candidates.setdefault(entity, Candidate())
                c.direct = True
                c.paths += result.counts[entity]
                c.evidence += [Evidence(p) for p in paths]
            found = len(result.answers)
            reasoning.append(f"followed {' / '.join(format_path(path))} from {topic}: "
                             f"{found} direct answer{'' if found == 1 else 's'}")
        # added, not set: a question that tries next-best paths reports all its attempts
        timings["direct_ms"] = timings.get("direct_ms", 0.0) + _ms(mark)
        mark = time.perf_counter()
        if step_rules:
            assert self.rules is not None
            derived = rule_candidates(self.view, topic, path[0], step_rules,
                                      evidence_per_answer=self.evidence_per_answer)
            for entity, derivation in derived.items():
                c = candidates.setdefault(entity, Candidate())
                c.rules.update(derivation.rules)
                c.paths += len(derivation.evidence)
                c.evidence += derivation.evidence[: self.evidence_per_answer]
            reasoning.append(f"ran {len(step_rules)} rules with head {path[0].relation} from "
                             f"{topic}: {len(derived)} candidates"
                             f" ({self.rules.origin})")
        timings["rules_ms"] = timings.get("rules_ms", 0.0) + _ms(mark)
        return candidates

    def _sources(self, path: RelationPath) -> tuple[list[MinedRule], bool]:
        """The rules run for the path (its relation's, for a one-step path) and whether its
        direct answers are followed too (rule-guided: only where no rule applies)."""
        step_rules = self.rules.for_step(path[0]) if self.rules is not None and len(path) == 1 else []
        return step_rules, not self.rule_guided or not step_rules

    def candidate_scores(self, topic: str, step: Step) -> dict[str, tuple[bool, float]]:
        """Per candidate of the one-step path: (a direct answer, its score), as
        :meth:`candidates` gives them, without evidence (calibration asks this of thousands
        of training questions)."""
        step_rules, use_direct = self._sources((step,))
        direct = self.view.follow([topic], step) - {topic} if use_direct else set()
        scores = {e: (True, DIRECT_SCORE) for e in direct}
        for entity, score in rule_scores(self.view, topic, step, step_rules).items():
            if entity not in direct:
                scores[entity] = (False, score)
        return scores

    def rank(self, candidates: dict[str, Candidate], threshold: float) -> list[ScoredAnswer]:
        scored = []
        for entity, c in candidates.items():
            score = c.score
            if not c.direct and score < threshold:
                continue
            scored.append((entity, score, c))
        scored.sort(key=lambda x: (-x[1], not x[2].direct, -x[2].paths, x[0]))
        labels = self.labels or {}
        return [ScoredAnswer(entity, round(score, 6), labels.get(entity), c.evidence)
                for entity, score, c in scored]


@dataclass
class Candidate:
    direct: bool = False
    paths: int = 0  # grounded paths found (direct and rule bodies): the tie-breaker
    evidence: list[Evidence] = field(default_factory=list)
    rules: dict[str, float] = field(default_factory=dict)  # rule text -> PCA confidence

    @property
    def score(self) -> float:
        return DIRECT_SCORE if self.direct else noisy_or(list(self.rules.values()))


# the cuts tried by calibration; 1.01 keeps direct answers only
CALIBRATION_PER_PATTERN = 25  # training questions per pattern a cut is learned on
THRESHOLD_GRID = (0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 1.01)


def calibrate(answerer: OfflineAnswerer, examples: Sequence[TrainingQuestion],
              grid: Sequence[float] = THRESHOLD_GRID, progress: Progress | None = None) -> dict[Step, float]:
    """Per one-relation step, the cut that maximises the mean :func:`objective` (F1 plus the
    recall of the answers the direct path misses) over the training questions linked to that
    step (``examples``: training questions). Ties go to the higher
    cut (fewer, surer answers). Steps with fewer than 5 questions keep the default."""
    totals: dict[Step, dict[float, float]] = {}
    counts: dict[Step, int] = {}
    for done, example in enumerate(examples, 1):
        if progress is not None:
            progress(done, len(examples))
        topic, gold = example.topic, example.answers
        linked = answerer.relation_linker.link(example.text, topic, example.written)
        if len(linked.path) != 1:
            continue
        step = linked.path[0]
        found = answerer.candidate_scores(topic, step)
        per_step = totals.setdefault(step, dict.fromkeys(grid, 0.0))
        counts[step] = counts.get(step, 0) + 1
        direct = {e for e, (is_direct, _) in found.items() if is_direct}
        for cut in grid:
            chosen = {e for e, (is_direct, score) in found.items() if is_direct or score >= cut}
            per_step[cut] += objective(chosen, gold, direct)
    return {step: max(grid, key=lambda cut: (per_step[cut], cut))
            for step, per_step in totals.items() if counts[step] >= 5}


RECALL_WEIGHT = 1.0


def objective(predicted: set[str], gold: frozenset[str], direct: AbstractSet[str] = frozenset()) -> float:
    """What a cut maximises on the training questions: F1 plus the recall of the gold answers
    the direct path misses (the answers a KB lacks are what rule-guided retrieval is for; F1
    alone would cut every uncertain one, and plain recall dilutes them in large answer sets)."""
    missing = gold - direct
    recovered = len(predicted & missing) / len(missing) if missing else 0.0
    return score_f1(predicted, gold) + RECALL_WEIGHT * recovered


def score_f1(predicted: set[str], gold: frozenset[str]) -> float:
    hits = len(predicted & gold)
    return 2 * hits / (len(predicted) + len(gold)) if hits else 0.0


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


# ---- the methods ------------------------------------------------------------------------------
LEARN_RULE_CONFIDENCE = 0.5  # rules that count when learning which relation a pattern asks


@dataclass(frozen=True)
class OfflineOptions:
    """The offline answerer's own settings."""

    use_rules: bool = True  # offline: add rule-guided candidates (rule-guided always does)
    min_score: float = 0.5  # rule-only candidates below this noisy-or score are dropped
    min_similarity: float = 0.3  # nearest known pattern at least this similar, else zero-shot
    # rank zero-shot paths with sentence embeddings too; None: when the `rag` extra is installed
    zero_shot_embeddings: bool | None = None
    calibrate: bool = True  # with a training split and rules: learn each relation's cut on it

    def check(self) -> None:
        for name in ("min_score", "min_similarity"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise KGEngineError(f"--option {name} must be between 0 and 1, got {getattr(self, name)}")


def build_offline_answerer(context: MethodContext, options: OfflineOptions, rule_guided: bool
                           ) -> OfflineAnswerer:
    """The offline answerer (``rule_guided``: the rules' candidates first) on the context's graph."""
    store, graph, settings = context.store, context.graph, context.settings
    linker = context.linker()
    rules: RuleSet | None = context.rules() if options.use_rules or rule_guided else None
    model = _learn(context, rules) if settings.train_paths else None
    labels = store.labels(graph)
    view = context.graph_view()  # after learning: the graph in memory if learning read it
    zero_shot = ZeroShotLinker(view, store.relation_labels(graph), _encoder(context, options), settings.hops,
                               labels, model, rules.rules if rules is not None else ())
    relation_linker: RelationLinker = (zero_shot if model is None else LearnedRelationLinker(
        zero_shot, model, options.min_similarity, view.relations()))
    answerer = OfflineAnswerer(view, linker, relation_linker, rules, context.method, options.min_score,
                               context.surface().entity, labels, rule_guided=rule_guided)
    if settings.train_paths and rules is not None and rules.rules and options.calibrate:
        answerer.thresholds = _cached_cuts(context, answerer, rules, lambda: _calibrate(context, answerer))
        if answerer.thresholds:
            cuts = [f"{step}={cut:g}" for step, cut in sorted(answerer.thresholds.items())]
            context.log(f"rule-candidate cuts learned on the training split for {len(cuts)} relation steps: "
                        + ", ".join(cuts[:8]) + (f" ... (+{len(cuts) - 8})" if len(cuts) > 8 else ""))
    return answerer


CUTS_VERSION = 1  # bump when calibration or relation linking changes what a cut means


def _write_cuts(cuts: dict[Step, float], path: Path) -> None:
    path.write_text(json.dumps({str(step): cut for step, cut in cuts.items()}), encoding="utf-8")


def _read_cuts(path: Path) -> dict[Step, float]:
    try:
        return {parse_step(k): float(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except AttributeError as exc:  # not a JSON object
        raise ValueError(str(exc)) from exc


LEARNED_CUTS: Artifact[dict[Step, float]] = Artifact("cuts", CUTS_VERSION, ".json", write=_write_cuts,
                                                     read=_read_cuts)


def _cached_cuts(context: MethodContext, answerer: OfflineAnswerer, rules: RuleSet,
                 learn: Callable[[], dict[Step, float]]) -> dict[Step, float]:
    """The learned cuts, from the cache when the graph (load stamp), training files, rules and
    settings are those they were learned with (calibrating runs the answerer on up to 25
    training questions per pattern: minutes on FB15k-237)."""
    store, graph, settings = context.store, context.graph, context.settings
    key = content_key(training_key(store, graph, settings.train_paths), rules.fingerprint,
                      str(THRESHOLD_GRID), str(RECALL_WEIGHT), str(answerer.min_score),
                      str(answerer.rule_guided), str(settings.hops))
    return ArtifactCache(settings.cache_dir).load_or_build(LEARNED_CUTS, key, learn, label=graph).value


def _calibrate(context: MethodContext, answerer: OfflineAnswerer) -> dict[Step, float]:
    examples = context.training_split().per_pattern(CALIBRATION_PER_PATTERN)
    context.log(f"learning the rule-candidate cuts on {len(examples):,} training questions")
    # thousands of questions, each running every rule of its step: on the graph in memory
    # where it fits, as for a batch
    if isinstance(answerer.view, HandoverGraphView):
        answerer.view.load_now()
    return calibrate(answerer, examples, progress=context.progress)


def _encoder(context: MethodContext, options: OfflineOptions) -> Encoder | None:
    """Sentence embeddings for the zero-shot ranking: loaded on the first question that needs
    them (a learned pattern never does)."""
    model = context.settings.embedding_model
    wanted = options.zero_shot_embeddings
    if wanted is None:
        wanted = embeddings_available(model)
    elif wanted:
        embeddings_available(model, required=True)  # a missing extra: one line, before any work
    return LazyEncoder(model) if wanted else None


def _learn(context: MethodContext, rules: RuleSet | None) -> PathModel:
    store, graph, settings = context.store, context.graph, context.settings
    done = [0]

    def advance(n: int) -> None:
        done[0] += n
        if context.progress is not None:
            context.progress(done[0], 0)

    model = learn_model(store, graph, list(settings.train_paths), context.memory_view, context.training_split,
                        rules, min_rule_confidence=LEARN_RULE_CONFIDENCE, max_hops=settings.hops,
                        cache_dir=settings.cache_dir, progress=advance)
    context.log(f"relation paths: {len(model.patterns)} patterns learned from {model.questions} training "
                f"questions ({model.skipped} skipped: topic or answers not in {graph!r}) in "
                + ", ".join(model.sources))
    return model


OFFLINE = MethodSpec(
    "the linked relation path plus rule-guided candidates (no LLM)",
    lambda context, options: build_offline_answerer(context, options, rule_guided=False),
    OfflineOptions, frozenset({Need.RULES, Need.TRAINING}), default_without_llm=True)
RULE_GUIDED = MethodSpec(
    "the mined rules' candidates only, the direct path where no rule applies (no LLM)",
    lambda context, options: build_offline_answerer(context, options, rule_guided=True),
    OfflineOptions, frozenset({Need.RULES, Need.TRAINING}))
