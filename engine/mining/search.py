"""AMIE 3's search, independent of how counts are obtained.

Breadth-first refinement of ``⊤ ⇒ r(?a, ?b)`` for every head relation with at least
``min_initial_support`` facts, following AMIE 3 (lajus/amie: AMIE.RDFMinerJob,
DefaultMiningAssistant, LazyMiningAssistant) decision by decision:

- operators, in AMIE's order: closing atoms (two existing variables; from a rule that is not
  closed, only atoms on its open variables), dangling atoms (an existing variable and a fresh
  one; from a rule that is not closed, joined on an open variable), instantiated atoms (with
  ``constants``: the fresh variable of a dangling atom bound to an entity);
- a candidate is kept when its support reaches ``ceil(min_hc * |head|)`` (AMIE's head-coverage
  pruning), it repeats no atom of the rule (head included) and no relation appears more than
  ``recursivity_limit`` times;
- AMIE exploits the maximum length: a rule one atom short of it gets no dangling atom unless it
  is closed (and those are counted but never queued, so they are not generated here);
- every closed rule gets its PCA body size counted first (stopping at ``ceil(support /
  min_pca) + 1``, LazyMiningAssistant), its body size only when the PCA confidence passes;
- a closed rule is output when std conf >= min_conf, PCA conf >= min_pca and, with the skyline
  on, its PCA confidence is higher than that of each closed ancestor: the rule it was first
  generated from, and every output rule with the same head whose body maps into its own
  (AMIE's ``setAdditionalParents``). (Some AMIE versions also drop rules whose relations all
  occur exactly twice, ``containsLevel2RedundantSubgraphs``; the AMIE 3 of the reference does
  not: only without that filter does Family at max-len 4 give AMIE 3's 3,925 rules.)
- a rule is refined while shorter than ``max_len`` and its PCA confidence is not exactly 1
  (``Rule.isPerfect`` tests the PCA confidence).

Rules are deduplicated per generation up to variable renaming, the first one generated wins
(AMIE's LinkedHashSet queue); variables are named as AMIE names them along that first path
(head ?a ?b; each operator call takes two fresh letters), so output rules read as AMIE's.
Each head relation is mined independently (AMIE's queue never mixes heads in any decision),
which is what ``threads`` parallelises.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kgengine.errors import KGEngineError
from kgengine.mining.counting import ENGINES, FRESH, CountingEngine
from kgengine.mining.io import MinedRule, amie_text
from kgengine.mining.measures import (
    Measures,
    RelationStats,
    Side,
    lazy_cap,
    support_threshold,
)
from kgengine.mining.rules import Atom, Rule, is_closed, is_variable, variable_counts

if TYPE_CHECKING:
    from kgengine.store import KGStore


def counting_engine(store: KGStore, graph: str, kind: str = "matrix",
                    on_read: Callable[[int], None] | None = None, persisted: bool = True) -> CountingEngine:
    """The counting engine ``kind`` over ``graph``: ``matrix`` counts on a sparse-matrix
    index of the graph, memory-mapped from the file written at load time when it is current
    (``persisted``), else read from the store (``on_read(n)`` after every n triples read) and
    written for the next run; ``query`` runs counting queries on the store."""
    if kind == "query":
        from kgengine.mining.query_engine import QueryEngine

        return QueryEngine(store, graph)
    if kind != "matrix":
        raise ValueError(f"unknown counting engine {kind!r}; known: {', '.join(ENGINES)}")
    from kgengine.mining.graph_index import KGIndex
    from kgengine.mining.index import cached_index
    from kgengine.mining.matrix import MatrixEngine

    index = cached_index(store, graph, on_read) if persisted else KGIndex.from_store(store, graph, on_read)
    return MatrixEngine(index)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it), the
    default number of mining threads, as AMIE 3 defaults to the available processors."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class MiningOptions:
    min_conf: float = 0.3
    min_pca: float = 0.4
    min_hc: float = 0.1
    max_len: int = 3  # atoms, head included (AMIE's -maxad)
    min_initial_support: int = 100  # AMIE's -minis
    skyline: bool = True
    constants: bool = False
    recursivity_limit: int = 3  # AMIE's -rl
    perfect_stop: bool = True  # do not refine rules of PCA confidence 1 (off: AMIE's -dpr)
    threads: int = field(default_factory=available_cores)  # results identical whatever the number

    def validate(self) -> None:
        for name in ("min_conf", "min_pca", "min_hc"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise KGEngineError(f"--{name.replace('_', '-')} must be between 0 and 1, got {value}")
        if self.max_len < 2:
            raise KGEngineError(f"--max-len must be at least 2 (head + one body atom), got {self.max_len}")
        if self.min_initial_support < 0:
            raise KGEngineError("--min-initial-support must be >= 0")
        if self.recursivity_limit < 1:
            raise KGEngineError("--recursivity-limit must be >= 1")
        if self.threads < 1:
            raise KGEngineError("--threads must be >= 1")


@dataclass(eq=False)
class Node:
    """One rule of the search, with AMIE's variable names and bookkeeping."""

    atoms: tuple[Atom, ...]  # head first
    support: int
    next_var: int  # AMIE's Rule.highestVariable: the next fresh letter
    parent: Node | None
    rule: Rule  # canonical form: the deduplication key
    measures: Measures | None = None

    @property
    def length(self) -> int:
        return len(self.atoms)


@dataclass
class HeadResult:
    relation: str
    rules: list[MinedRule] = field(default_factory=list)
    candidates: int = 0  # rules enqueued (AMIE's queue size)
    evaluated: int = 0  # closed rules whose confidences were counted


def fresh_variable(index: int) -> str:
    """AMIE's fresh variable names: ?a .. ?z, then ?a1 .. ?z1, ..."""
    letter = chr(ord("a") + index % 26)
    return f"?{letter}{index // 26}" if index >= 26 else f"?{letter}"


def subsumes(general: Sequence[Atom], specific: Sequence[Atom]) -> bool:
    """Same head and the general body maps into the specific one (head variables fixed)."""
    if general[0] != specific[0] or len(general) >= len(specific):
        return False
    head_vars = set(general[0].variables)
    targets = list(specific[1:])

    def extend(i: int, mapping: dict[str, str]) -> bool:
        if i == len(general) - 1:
            return True
        atom = general[i + 1]
        for candidate in targets:
            if candidate.relation != atom.relation:
                continue
            trial = dict(mapping)
            ok = True
            for mine, theirs in zip(atom.terms, candidate.terms, strict=True):
                if not is_variable(mine) or mine in head_vars:
                    ok = mine == theirs
                elif trial.setdefault(mine, theirs) != theirs:
                    ok = False
                if not ok:
                    break
            if ok and extend(i + 1, trial):
                return True
        return False

    return extend(0, {})


def _unifiable(general: Atom, specific: Atom) -> bool:
    if general.relation != specific.relation:
        return False
    return all(g == s or is_variable(g) for g, s in zip(general.terms, specific.terms, strict=True))


class Miner:
    """Runs the search for every head relation and collects the output rules."""

    def __init__(self, engine: CountingEngine, options: MiningOptions) -> None:
        options.validate()
        self.engine = engine
        self.options = options
        self.stats = engine.relation_stats()
        self._cancel = threading.Event()

    def heads(self) -> list[str]:
        """Head relations: at least ``min_initial_support`` facts (AMIE's -minis), by name."""
        return sorted(r for r, s in self.stats.items() if s.facts >= self.options.min_initial_support)

    def mine(self, on_head_done: Callable[[HeadResult], None] | None = None) -> list[HeadResult]:
        """Mine every head relation; results in head-name order. With ``threads`` > 1 the
        heads run in parallel, the largest first (they take longest): in worker processes
        for an engine that says so (the matrix engine: its many small numpy/scipy calls hold
        the GIL more than they release it, so threads were measured slower than one), in
        threads otherwise (the store's query engine releases the GIL while it evaluates)."""
        heads = self.heads()
        order = sorted(heads, key=lambda h: (-self.stats[h].facts, h))
        workers = min(self.options.threads, len(heads))
        results: dict[str, HeadResult] = {}

        def collect(result: HeadResult) -> None:
            results[result.relation] = result
            if on_head_done:
                on_head_done(result)

        if workers <= 1:
            for head in order:
                collect(self.mine_head(head))
        elif getattr(self.engine, "parallel", "threads") == "processes" and _can_fork():
            global _WORKER
            _WORKER = self  # inherited by the forked workers: the index is shared, not copied
            gc.freeze()  # and the workers' collector does not write to (so copy) its objects
            try:
                with multiprocessing.get_context("fork").Pool(workers, _quiet_worker) as pool:
                    for result in pool.imap_unordered(_mine_in_worker, order):
                        collect(result)
            finally:
                gc.unfreeze()
        else:
            executor = ThreadPoolExecutor(max_workers=workers)
            try:
                for future in as_completed([executor.submit(self.mine_head, h) for h in order]):
                    collect(future.result())
            except BaseException:
                self._cancel.set()  # Ctrl-C: running heads stop at their next rule
                executor.shutdown(wait=True, cancel_futures=True)
                raise
            executor.shutdown(wait=True)
        return [results[h] for h in heads]

    # -- one head relation ---------------------------------------------------------------------
    def mine_head(self, relation: str) -> HeadResult:
        opts = self.options
        stats = self.stats[relation]
        threshold = support_threshold(opts.min_hc, stats.facts)
        side = stats.functional_side
        head = Atom(relation, "?a", "?b")
        result = HeadResult(relation)
        generation = [Node((head,), stats.facts, 2, None, Rule.of((), head))]
        outputs: list[Node] = []
        while generation:
            next_generation: dict[Rule, Node] = {}
            new_outputs = []
            counted = self._count_together(generation, side)
            for node in generation:
                if self._cancel.is_set():
                    raise KeyboardInterrupt
                perfect = False
                if node.length > 1 and is_closed(node.atoms):
                    node.measures = self._measure(node, stats, side, counted.get(id(node)))
                    result.evaluated += 1
                    perfect = opts.perfect_stop and node.measures.is_perfect
                    if self._should_output(node, outputs):
                        new_outputs.append(node)
                if node.length < opts.max_len and not perfect:
                    for child in self._refine(node, threshold):
                        next_generation.setdefault(child.rule, child)
            outputs.extend(new_outputs)
            for node in generation:
                node.parent = None  # only the direct parent is a skyline ancestor: free the rest
            generation = list(next_generation.values())
            result.candidates += len(generation)
        result.rules = [
            MinedRule.from_measures(n.rule, n.measures, amie_text(n.atoms[1:], n.atoms[0]))
            for n in outputs
            if n.measures is not None
        ]
        return result

    def _pca_passes(self, support: int, pca: int) -> bool:
        # LazyMiningAssistant: the standard confidence is only counted when the PCA one passes
        return self.options.min_pca <= 0 or bool(pca and support / pca >= self.options.min_pca)

    def _count_together(self, generation: list[Node], side: Side) -> dict[int, tuple[int, int | None]]:
        """(PCA body size, body size or None) of the closed rules of a generation that the
        engine counts in batches (``body_sizes``, the matrix engine's path rules), by node id;
        the body size only where the PCA confidence passes, as one by one; both lazy (capped)
        as one by one (see ``body_sizes``)."""
        batch = getattr(self.engine, "body_sizes", None)
        closed = [n for n in generation if n.length > 1 and is_closed(n.atoms)]
        if batch is None or len(closed) < 2:
            return {}
        opts = self.options
        pcas = batch([n.atoms for n in closed], pca=True, subject_side=side == Side.SUBJECT,
                     caps=[lazy_cap(n.support, opts.min_pca) for n in closed])
        out: dict[int, tuple[int, int | None]] = {id(n): (p, None) for n, p in zip(closed, pcas, strict=True)
                                                  if p is not None}
        passing = [n for n in closed if id(n) in out and self._pca_passes(n.support, out[id(n)][0])]
        bodies = batch([n.atoms for n in passing], caps=[lazy_cap(n.support, opts.min_conf) for n in passing])
        for node, body in zip(passing, bodies, strict=True):
            out[id(node)] = (out[id(node)][0], body)
        return out

    def _measure(self, node: Node, stats: RelationStats, side: Side,
                 counted: tuple[int, int | None] | None = None) -> Measures:
        opts = self.options
        if counted is not None:
            pca, body_counted = counted
        else:
            pca = self.engine.pca_body_size(
                node.atoms, side == Side.SUBJECT, lazy_cap(node.support, opts.min_pca))
            body_counted = None
        body = 0
        if self._pca_passes(node.support, pca):
            body = body_counted if body_counted is not None else self.engine.body_size(
                node.atoms, lazy_cap(node.support, opts.min_conf))
        return Measures(node.support, stats.facts, body, pca, side)

    def _should_output(self, node: Node, outputs: list[Node]) -> bool:
        m = node.measures
        opts = self.options
        if m is None:
            return False
        if not (m.body_size and m.std_confidence >= opts.min_conf and m.pca_confidence >= opts.min_pca):
            return False
        if not opts.skyline:
            return True
        ancestors = [node.parent] if node.parent is not None else []
        ancestors += [o for o in outputs if subsumes(o.atoms, node.atoms)]
        for ancestor in ancestors:
            if ancestor.measures is not None and m.pca_confidence <= ancestor.measures.pca_confidence:
                return False
        return True

    def _refine(self, node: Node, threshold: int) -> list[Node]:
        opts = self.options
        atoms = node.atoms
        occ = variable_counts(atoms)
        # AMIE walks its variable histogram (a fastutil hash map) in hash order, which for the
        # head visits ?b before ?a; latest-first order reproduces AMIE 3 where the order matters
        # (which parent generates a rule first, hence its skyline ancestor): FB15k-237 gives
        # 1,262 rules at max-len 3 as AMIE 3 does (1,263 in first-appearance order)
        order = list(occ)[::-1]
        open_vars = [v for v in order if occ[v] == 1]
        closed = not open_vars
        length = node.length

        # closing atoms (DefaultMiningAssistant.getClosingAtoms)
        closing: list[tuple[str, str]] = []
        ran_closing = False
        if len(order) >= 2:
            source, target = (order, order) if closed else (open_vars, open_vars)
            if not closed and len(open_vars) <= 1:
                target = order
            if not closed and len(open_vars) > 2 and length == opts.max_len - 1:
                source = []  # cannot close more than two open variables with one atom
            else:
                ran_closing = True
            for join_subject in (True, False):
                for s in source:
                    for t in target:
                        if t != s:
                            shape = (s, t) if join_subject else (t, s)
                            if shape not in closing:
                                closing.append(shape)
        # letters: each operator call takes two (Rule.fullyUnboundTriplePattern)
        after_closing = node.next_var + (2 if ran_closing else 0)
        fresh_subject, fresh_object = fresh_variable(after_closing), fresh_variable(after_closing + 1)

        # dangling atoms (getDanglingAtoms; AMIE.java queues them only below max_len - 1)
        dangling: list[tuple[str, str]] = []
        queue_dangling = length < opts.max_len - 1
        if queue_dangling or (opts.constants and length == opts.max_len - 1):
            join = order if closed else open_vars
            dangling = [(v, FRESH) for v in join] + [(FRESH, v) for v in join]

        counts = self.engine.refinement_counts(atoms, closing + dangling, threshold)
        children: list[Node] = []
        for shape, found in zip(closing, counts, strict=False):
            for relation, support in self._frequent(found, threshold, atoms):
                atom = Atom(relation, *shape)
                if atom in atoms:  # isRedundantRecursive: the same atom twice
                    continue
                children.append(self._child(node, atom, support, after_closing))
        danglers: list[tuple[Node, str, str]] = []
        for shape, found in zip(dangling, counts[len(closing):], strict=True):
            fresh = fresh_object if shape[1] == FRESH else fresh_subject
            join_var = shape[0] if shape[1] == FRESH else shape[1]
            for relation, support in self._frequent(found, threshold, atoms):
                atom = Atom(relation, join_var if shape[0] != FRESH else fresh,
                            fresh if shape[0] != FRESH else join_var)
                danglers.append((self._child(node, atom, support, after_closing + 2), fresh, join_var))
        if opts.constants:
            children.extend(self._instantiate(danglers, threshold))
        if queue_dangling:
            children.extend(d for d, _, _ in danglers)
        return children

    def _frequent(
        self, found: dict[str, int], threshold: int, atoms: Sequence[Atom]
    ) -> list[tuple[str, int]]:
        """Relations by decreasing support down to the threshold, within the recursivity limit."""
        out = []
        for relation, support in sorted(found.items(), key=lambda kv: (-kv[1], kv[0])):
            if support < threshold:
                break
            if sum(a.relation == relation for a in atoms) >= self.options.recursivity_limit:
                continue
            out.append((relation, support))
        return out

    @staticmethod
    def _child(parent: Node, atom: Atom, support: int, next_var: int) -> Node:
        atoms = (*parent.atoms, atom)
        return Node(atoms, support, next_var, parent, Rule.of(atoms[1:], atoms[0]))

    def _instantiate(self, danglers: list[tuple[Node, str, str]], threshold: int) -> list[Node]:
        """Instantiated atoms: the fresh variable of a dangling candidate bound to an entity,
        kept when the support reaches the threshold, the atom is not unifiable with another
        atom of the rule, and its other variable still takes >= 2 values (AMIE)."""
        out = []
        for dangler, fresh, join_var in danglers:
            constants = self.engine.constant_counts(dangler.atoms, fresh, join_var, threshold)
            for constant, support in sorted(constants.items(), key=lambda kv: (-kv[1], kv[0])):
                if support < threshold:
                    break
                new_atom = dangler.atoms[-1].rename({fresh: constant})
                rest = dangler.atoms[:-1]
                if any(_unifiable(a, new_atom) or _unifiable(new_atom, a) for a in rest):
                    continue
                atoms = (*rest, new_atom)
                # its parent is the dangling rule (AMIE: addParent(candidate)), never closed
                out.append(Node(atoms, support, dangler.next_var, dangler,
                                Rule.of(atoms[1:], atoms[0])))
        return out


_WORKER: Miner | None = None


def _quiet_worker() -> None:
    """Workers ignore Ctrl-C: the main process gets it and terminates them (no tracebacks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _mine_in_worker(relation: str) -> HeadResult:
    assert _WORKER is not None
    return _WORKER.mine_head(relation)


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def mine(engine: CountingEngine, options: MiningOptions,
         on_head_done: Callable[[HeadResult], None] | None = None) -> list[MinedRule]:
    """All output rules, grouped by head relation (by name), in AMIE's generation order."""
    miner = Miner(engine, options)
    return [rule for result in miner.mine(on_head_done) for rule in result.rules]
