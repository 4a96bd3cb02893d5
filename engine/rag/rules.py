"""Rule-guided retrieval: answers a KG lacks the direct triple for, found through the mined
rules whose head is the relation the question asks about.

For a question ``(topic, r, ?)`` (or ``(?, r, topic)``), every rule ``body => r(?a, ?b)`` is
run with the topic bound to ``?a`` (or ``?b``) on the answerer's
:class:`~kgengine.rag.graph.view.GraphView` (the store's ``rule_groundings`` twins, or the
same rows from the graph in memory); each grounding gives a candidate (the other head variable), its grounded
body path, and the rule with its PCA confidence.

Rules come from a file (``--rules``: ``kgengine mine`` / AMIE 3 output, a BRINK rules.tsv) or
are mined on the answered graph on first use with BRINK's AMIE 3 settings (std conf 0.3, PCA
conf 0.4, head coverage 0.1, max length 3) and cached on disk per graph and load stamp, so a
reloaded graph is mined again. For BRINK that graph is the incomplete KG: rules never come
from the complete one."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kgengine.config import cache_dir
from kgengine.fsutil import atomic_path
from kgengine.mining.io import MinedRule, read_rules, write_tsv
from kgengine.mining.presets import BRINK_MINING, mine_brink_rules
from kgengine.mining.rules import is_variable
from kgengine.model import Triple
from kgengine.rag.base import Evidence
from kgengine.rag.graph.steps import Step
from kgengine.rag.graph.view import GraphView, bind_topic
from kgengine.store import KGStore, short_digest

DEFAULT_MAX_LEN = 3
RULE_LIMIT = 1_000  # groundings per rule and question (the first in the store's order)


def default_cache_dir() -> Path:
    """The root of the answerers' caches (rules/, paths/): kgengine.config's rule."""
    return cache_dir()


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
        return short_digest(*sorted(f"{r.rule}\t{r.std_confidence}\t{r.pca_confidence}" for r in self.rules))

    def for_step(self, step: Step) -> list[MinedRule]:
        """Rules whose head is the step's relation (either direction: the step says which
        head argument the topic binds), usable from a bound topic, best PCA confidence first."""
        out = [r for r in self.rules if r.head_relation == step.relation
               and is_variable(r.rule.head.subject) and is_variable(r.rule.head.object)
               and r.rule.head.subject != r.rule.head.object]
        return sorted(out, key=lambda r: (-r.pca_confidence, -r.std_confidence, str(r.rule)))


def cache_path(store: KGStore, graph: str, max_len: int, cache_dir: Path | None = None) -> Path:
    """Per store, graph and load stamp: reloading the graph (a new stamp) invalidates it."""
    info = store.require_graph(graph)
    key = "\t".join([store.location, graph, info.loaded_at, str(info.triples), str(max_len),
                     repr((BRINK_MINING.min_conf, BRINK_MINING.min_pca, BRINK_MINING.min_hc))])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return (cache_dir or default_cache_dir()) / "rules" / f"{graph}-len{max_len}-{digest}.tsv"


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
    if rules_path is not None:
        rules = read_rules(rules_path)
        return RuleSet(rules, f"{len(rules)} rules from {rules_path}")
    path = cache_path(store, graph, max_len, cache_dir)
    if path.is_file():
        rules = read_rules(path) if path.stat().st_size > 0 and _has_rules(path) else []
        return RuleSet(rules, f"{len(rules)} rules mined on {graph!r} earlier", path)
    log(f"mining rules on graph {graph!r} (first use; BRINK's AMIE 3 settings, max length {max_len})")
    rules = mine_brink_rules(store, graph, max_len, threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as partial:
        write_tsv(rules, partial)
    # read back: the confidences as the cache holds them (rounded), so that answers, and the
    # keys of what is learned with the rules, are the same on first use as on every later one
    rules = read_rules(path) if rules else []
    return RuleSet(rules, f"{len(rules)} rules mined on {graph!r} on first use", path)


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
