"""Rule-guided retrieval: answers a KG lacks the direct triple for, found through the mined
rules whose head is the relation the question asks about.

For a question ``(topic, r, ?)`` (or ``(?, r, topic)``), every rule ``body => r(?a, ?b)`` is
run with the topic bound to ``?a`` (or ``?b``) as a query through the groundings machinery
(:func:`kgengine.mining.groundings.groundings`, the ``rule_groundings`` twins), so either
backend answers it; each grounding gives a candidate (the other head variable), its grounded
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

from kgengine.artifacts import Artifact, ArtifactCache, cache_root, content_key, graph_stamp
from kgengine.errors import KGEngineError
from kgengine.mining.groundings import HeadFilter, grounding_variables, groundings
from kgengine.mining.io import MinedRule, read_rules, write_tsv
from kgengine.mining.presets import BRINK_MINING, mine_brink_rules
from kgengine.mining.rules import Atom, Rule, is_variable
from kgengine.model import Triple
from kgengine.rag.base import Evidence
from kgengine.rag.paths import GraphAdjacency, Step, body_groundings
from kgengine.store import KGStore, short_digest

DEFAULT_MAX_LEN = 3
RULE_LIMIT = 1_000  # groundings per rule and question (the first in the store's order)


def default_cache_dir() -> Path:
    """Transitional, for rag/relations.py until it moves to kgengine.artifacts (delete then)."""
    return cache_root()


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


def cache_path(store: KGStore, graph: str, max_len: int, cache_dir: Path | None = None) -> Path:
    """The cache file of the rules mined on ``graph`` as loaded now (``cache_dir``: the cache
    root instead of :func:`kgengine.artifacts.cache_root`)."""
    key = _rules_key(store, graph, max_len)
    return ArtifactCache(cache_dir).path(MINED_RULES, key, f"{graph}-len{max_len}")


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


def bind_topic(rule: Rule, step: Step, topic: str) -> tuple[Rule, str]:
    """The rule with the topic in place of the head variable it binds, and the name of the
    variable that holds the answer (without ``?``)."""
    bound, free = (rule.head.object, rule.head.subject) if step.inverse else (
        rule.head.subject, rule.head.object)
    mapping = {bound: topic}

    def sub(atom: Atom) -> Atom:
        return Atom(atom.relation, mapping.get(atom.subject, atom.subject),
                    mapping.get(atom.object, atom.object))

    # Rule(...) directly, not Rule.of: canonical renaming would rename the answer variable
    return Rule(tuple(sub(a) for a in rule.body), sub(rule.head)), free.lstrip("?")


@dataclass
class RuleCandidate:
    entity: str
    evidence: list[Evidence]
    rules: dict[str, float]  # rule text -> its PCA confidence (each rule once)


def rule_candidates(
    store: KGStore,
    graph: str,
    topic: str,
    step: Step,
    rules: Sequence[MinedRule],
    limit_per_rule: int = RULE_LIMIT,
    evidence_per_answer: int = 3,
    graph_in_memory: GraphAdjacency | None = None,
) -> dict[str, RuleCandidate]:
    """Candidates for ``(topic, step, ?)`` derived by ``rules`` from the topic: each with up
    to ``evidence_per_answer`` grounded paths and every rule that derived it. With the graph
    in memory (``graph_in_memory``: the store's graph) the groundings are found there, the
    same rows in the same order as the store's query (calibration answers thousands of
    questions: one query per rule and question was minutes on FB15k-237)."""
    out: dict[str, RuleCandidate] = {}
    for mined in rules:
        bound, answer_var = bind_topic(mined.rule, step, topic)
        if graph_in_memory is None:
            rows = groundings(store, graph, bound, head=HeadFilter.ANY, limit=limit_per_rule)
        else:
            rows = groundings_in_memory(graph_in_memory, bound, store.order_key, limit_per_rule)
        text = str(mined.rule)
        for row in rows:
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


def rule_answers_in_memory(adjacency: GraphAdjacency, rule: Rule, answer_var: str,
                           order_key: Callable[[str], str], limit: int) -> set[str]:
    """The answers (values of ``answer_var``) of :func:`groundings_in_memory`'s rows, sorted
    only when the limit cuts (calibration needs the answers, not the rows); ``answer_var``
    without '?', as :func:`bind_topic` names it."""
    columns, rows = _rows_in_memory(adjacency, rule)
    if len(rows) > limit:
        rows = _store_order(rows, order_key)[:limit]
    at = columns.index(f"?{answer_var}") if rows else 0
    return {row[at] for row in rows}


def groundings_in_memory(adjacency: GraphAdjacency, rule: Rule, order_key: Callable[[str], str],
                         limit: int) -> list[dict[str, str]]:
    """:func:`kgengine.mining.groundings.groundings` of the rule body (head not checked)
    computed on the graph in memory: distinct rows with variable names without '?', sorted
    as the backend's ``ORDER BY`` sorts them (``order_key``), the first ``limit``."""
    columns, rows = _rows_in_memory(adjacency, rule)
    names = [v.lstrip("?") for v in columns]
    return [dict(zip(names, row, strict=True)) for row in _store_order(rows, order_key)[:limit]]


def _rows_in_memory(adjacency: GraphAdjacency, rule: Rule) -> tuple[list[str], list[tuple[str, ...]]]:
    """The body's groundings with their columns in ``grounding_variables`` order (the
    store query's). The join's rows are distinct over its variables, which are the rule's:
    no DISTINCT pass is needed."""
    columns = grounding_variables(rule)
    found, joined = body_groundings(adjacency, rule.body, {})
    if not joined:
        return columns, []
    at = [found.index(v) for v in columns]
    return columns, joined if at == list(range(len(found))) else [tuple(map(row.__getitem__, at))
                                                                  for row in joined]


def _store_order(rows: list[tuple[str, ...]], order_key: Callable[[str], str]) -> list[tuple[str, ...]]:
    if len(rows) > 1:
        keys = {value: order_key(value) for value in {v for row in rows for v in row}}
        rows = sorted(rows, key=lambda row: tuple(map(keys.__getitem__, row)))
    return rows


def _ground(term: str, row: dict[str, str]) -> str:
    return row[term.lstrip("?")] if is_variable(term) else term


def noisy_or(confidences: Sequence[float]) -> float:
    """1 - prod(1 - c): the chance that at least one supporting rule is right, were they
    independent (each rule counted once, however many of its groundings support the answer)."""
    remaining = 1.0
    for c in confidences:
        remaining *= 1.0 - min(max(c, 0.0), 1.0)
    return 1.0 - remaining
