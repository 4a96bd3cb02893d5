"""Rule-guided retrieval: answers a KG lacks the direct triple for, found through the mined
rules whose head is the relation the question asks about.

For a question ``(topic, r, ?)`` (or ``(?, r, topic)``), every rule ``body => r(?a, ?b)`` is
run with the topic bound to ``?a`` (or ``?b``) on the answerer's
:class:`~kgengine.rag.graph.view.GraphView` (the store's ``rule_groundings`` twins, or the
same rows from the graph in memory); each grounding gives a candidate (the other head variable), its grounded
body path, and the rule with its PCA confidence.

Rules come from a file (``--rules``: ``kgengine mine`` / AMIE 3 output, a BRINK rules.tsv) or
are mined on the answered graph on first use with BRINK's AMIE 3 settings (std conf 0.3, PCA
conf 0.4, head coverage 0.1, max length 3) and cached (:mod:`kgengine.artifacts`, kind
``rules``) per graph load stamp and settings, so a reloaded graph is mined again. For BRINK
that graph is the incomplete KG: rules never come from the complete one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kgengine.artifacts import Artifact, ArtifactCache, content_key, graph_stamp
from kgengine.errors import KGEngineError
from kgengine.mining.io import MinedRule, read_rules, write_tsv
from kgengine.mining.presets import BRINK_MINING, mine_brink_rules
from kgengine.mining.rules import is_variable
from kgengine.model import Triple
from kgengine.rag.base import Evidence
from kgengine.rag.graph.steps import Step
from kgengine.rag.graph.view import GraphView, bind_topic
from kgengine.store import KGStore

DEFAULT_MAX_LEN = 3
RULE_LIMIT = 1_000  # groundings per rule and question (the first in the store's order)


@dataclass(frozen=True)
class RuleSet:
    rules: list[MinedRule]
    origin: str  # where they came from, said in answers' reasoning
    cached_at: Path | None = None  # mined rules: their cache file (said on the log, not in answers)

    @property
    def description(self) -> str:
        return self.origin + (f", cached at {self.cached_at}" if self.cached_at else "")

    @cached_property
    def fingerprint(self) -> str:
        """What the rules are (texts and confidences), for the keys of caches learned with them."""
        return content_key(*sorted(f"{r.rule}\t{r.std_confidence}\t{r.pca_confidence}" for r in self.rules))

    def for_step(self, step: Step) -> list[MinedRule]:
        """Rules whose head is the step's relation (either direction: the step says which
        head argument the topic binds), usable from a bound topic, best PCA confidence first."""
        out = [r for r in self.rules if r.head_relation == step.relation
               and is_variable(r.rule.head.subject) and is_variable(r.rule.head.object)
               and r.rule.head.subject != r.rule.head.object]
        return sorted(out, key=lambda r: (-r.pca_confidence, -r.std_confidence, str(r.rule)))


def _read_cached_rules(path: Path) -> list[MinedRule]:
    if path.stat().st_size == 0 or not _has_rules(path):
        return []  # nothing was mined (too small a graph): an empty list, cached too
    try:
        return read_rules(path)
    except KGEngineError as exc:  # not a whole rules file: the cache builds it again
        raise ValueError(str(exc)) from exc


# version 1: the rules TSV of kgengine.mining.io (AMIE's columns)
MINED_RULES: Artifact[list[MinedRule]] = Artifact("rules", 1, ".tsv", write=write_tsv,
                                                  read=_read_cached_rules)


def _rules_key(store: KGStore, graph: str, max_len: int) -> str:
    """What mined rules depend on: the graph's load (a reload mines again) and the settings."""
    return content_key(graph_stamp(store, graph), str(max_len),
                       repr((BRINK_MINING.min_conf, BRINK_MINING.min_pca, BRINK_MINING.min_hc)))


def load_rules(
    store: KGStore,
    graph: str,
    rules_path: Path | str | None = None,
    *,
    max_len: int = DEFAULT_MAX_LEN,
    cache_dir: Path | None = None,
    threads: int = 1,
    log: Callable[[str], None] = lambda _: None,
) -> RuleSet:
    """Rules from ``rules_path``, else those mined on ``graph`` (cached: mined on first use).
    Mined rules are the cache file's as read back (confidences rounded as the file holds
    them), so that answers, and the keys of what is learned with the rules, are the same on
    first use as on every later one."""
    if rules_path is not None:
        rules = read_rules(rules_path)
        return RuleSet(rules, f"{len(rules)} rules from {rules_path}")

    def mine() -> list[MinedRule]:
        log(f"mining rules on graph {graph!r} (first use; BRINK's AMIE 3 settings, max length {max_len})")
        return mine_brink_rules(store, graph, max_len, threads)

    cached = ArtifactCache(cache_dir).load_or_build(MINED_RULES, _rules_key(store, graph, max_len), mine,
                                                    label=f"{graph}-len{max_len}")
    when = "earlier" if cached.hit else "on first use"
    return RuleSet(cached.value, f"{len(cached.value)} rules mined on {graph!r} {when}", cached.path)


def _has_rules(path: Path) -> bool:
    with path.open(encoding="utf-8") as fh:
        return any("=>" in line for line in fh)


@dataclass
class RuleCandidate:
    entity: str
    evidence: list[Evidence]
    rules: dict[str, float]  # rule text -> its PCA confidence (each rule once)


def rule_candidates(
    view: GraphView,
    topic: str,
    step: Step,
    rules: Sequence[MinedRule],
    limit_per_rule: int = RULE_LIMIT,
    evidence_per_answer: int = 3,
) -> dict[str, RuleCandidate]:
    """Candidates for ``(topic, step, ?)`` derived by ``rules`` from the topic: each with up
    to ``evidence_per_answer`` grounded paths and every rule that derived it (the first
    ``limit_per_rule`` groundings of each rule, in the store's order, on either view)."""
    out: dict[str, RuleCandidate] = {}
    for mined in rules:
        bound, answer_var = bind_topic(mined.rule, step, topic)
        text = str(mined.rule)
        for row in view.rule_groundings(bound, limit_per_rule):
            answer = row.get(answer_var)
            if answer is None or answer == topic:
                continue
            candidate = out.setdefault(answer, RuleCandidate(answer, [], {}))
            candidate.rules.setdefault(text, mined.pca_confidence)
            if len(candidate.evidence) < evidence_per_answer:
                path = tuple(Triple(_ground(a.subject, row), a.relation, _ground(a.object, row))
                             for a in bound.body)
                candidate.evidence.append(Evidence(path, text, mined.pca_confidence))
    return out


def rule_scores(view: GraphView, topic: str, step: Step, rules: Sequence[MinedRule],
                limit_per_rule: int = RULE_LIMIT) -> dict[str, float]:
    """The noisy-or score of every candidate :func:`rule_candidates` gives, without evidence
    (calibration asks this of thousands of training questions)."""
    derived: dict[str, list[float]] = {}
    for mined in rules:
        bound, answer_var = bind_topic(mined.rule, step, topic)
        for answer in view.rule_answers(bound, answer_var, limit_per_rule):
            if answer != topic:
                derived.setdefault(answer, []).append(mined.pca_confidence)
    return {entity: noisy_or(confidences) for entity, confidences in derived.items()}


def _ground(term: str, row: dict[str, str]) -> str:
    return row[term.lstrip("?")] if is_variable(term) else term


def noisy_or(confidences: Sequence[float]) -> float:
    """1 - prod(1 - c): the chance that at least one supporting rule is right, were they
    independent (each rule counted once, however many of its groundings support the answer)."""
    remaining = 1.0
    for c in confidences:
        remaining *= 1.0 - min(max(c, 0.0), 1.0)
    return 1.0 - remaining
