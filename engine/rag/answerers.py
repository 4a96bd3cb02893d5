"""Building an answerer from options: the one entry point the CLI (``kgengine ask``), the
evaluation harness and Python users call.

``offline`` and ``rule-guided`` are :class:`kgengine.rag.offline.OfflineAnswerer`; the LLM
methods (``llm``, ``llm-qd``, ``llm-kg``, ``full``) come from
:func:`kgengine.rag.llm_methods.build_llm_answerer`, imported only when asked for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from kgengine.errors import GraphNotFoundError, KGEngineError
from kgengine.rag.base import Answerer
from kgengine.rag.linking import GraphEntityLinker
from kgengine.rag.paths import Adjacency
from kgengine.rag.relations import PathModel, RelationLinker, ZeroShotLinker, learn_model
from kgengine.rag.rules import DEFAULT_MAX_LEN, RuleSet, load_rules
from kgengine.store import KGStore

METHODS = ("offline", "rule-guided", "llm", "llm-qd", "llm-kg", "full")
OFFLINE_METHODS = ("offline", "rule-guided")
LABELS = ("private", "dataset", "text")
LEARN_RULE_CONFIDENCE = 0.5  # rules that count when learning which relation a pattern asks


@dataclass(frozen=True)
class AskOptions:
    """Everything ``kgengine ask`` can set; defaults are the offline answerer's."""

    method: str = "offline"
    hops: int = 3  # most hops of a learned path (files without a hop count) or a zero-shot one;
    # the k-hop retrieval depth of the LLM methods
    top_k: int = 20  # triples selected for the LLM methods
    rules_path: Path | None = None  # None: mine the answered graph on first use (cached)
    use_rules: bool = True
    rules_max_len: int = DEFAULT_MAX_LEN
    train_paths: tuple[Path, ...] = ()
    labels: str = "dataset"  # how answers are written in raw_output: private|dataset|text
    min_score: float = 0.5  # rule-only candidates below this noisy-or score are dropped
    min_similarity: float = 0.3  # nearest known pattern at least this similar, else zero-shot
    embedding_model: str | None = None  # zero-shot linking (offline) and selection (LLM methods)
    zero_shot_embeddings: bool = False  # offline: embed questions against relation names too
    calibrate: bool = True  # with --train and rules: learn each relation's cut on the training split
    cache_dir: Path | None = None  # rules and learned patterns [default: the user cache dir]
    threads: int = 1  # mining on first use
    direction: str = "both"  # k-hop retrieval direction (LLM methods)
    hub_cap: int | None = None  # k-hop retrieval hub cap (LLM methods)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_cache: Path | None = None
    llm_timeout: float | None = None  # None: kgengine.llm's setting (environment, config, 120 s)
    extra: dict[str, Any] = field(default_factory=dict)  # passed on to the LLM methods

    def check(self) -> None:
        if self.method not in METHODS:
            raise KGEngineError(f"unknown method {self.method!r} (choose from {', '.join(METHODS)})")
        if self.labels not in LABELS:
            raise KGEngineError(f"unknown labels {self.labels!r} (choose from {', '.join(LABELS)})")
        if not 1 <= self.hops <= 3:
            raise KGEngineError(f"--hops must be 1, 2 or 3, got {self.hops}")
        if self.top_k < 1:
            raise KGEngineError(f"--top-k must be at least 1, got {self.top_k}")
        if not 0.0 <= self.min_score <= 1.0:
            raise KGEngineError(f"--min-score must be between 0 and 1, got {self.min_score}")
        for path in (*self.train_paths, *([self.rules_path] if self.rules_path else [])):
            if not Path(path).is_file():
                raise KGEngineError(f"file {path} does not exist")


Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def build_answerer(store: KGStore, graph: str, options: AskOptions = AskOptions(), *,
                   log: Log = _quiet, progress: Callable[[int, int], None] | None = None) -> Answerer:
    """The answerer ``options.method`` names, for ``graph`` of ``store``. ``log`` receives
    one-line notes (rules mined or read from the cache, patterns learned); ``progress(done,
    total)`` is called while training questions are searched."""
    options.check()
    info = store.graph_info(graph)
    if info is None:
        known = ", ".join(i.name for i in store.graphs()) or "none"
        raise GraphNotFoundError(f"no graph {graph!r} in {store.location} (graphs: {known})")
    if options.method in OFFLINE_METHODS:
        return build_offline(store, graph, options, log=log, progress=progress)
    return build_llm(store, graph, options)


def build_offline(store: KGStore, graph: str, options: AskOptions, *, log: Log = _quiet,
                  progress: Callable[[int, int], None] | None = None) -> Any:
    from kgengine.rag.offline import OfflineAnswerer, calibrate
    from kgengine.rag.verbalise import SurfaceForms

    linker = GraphEntityLinker(store, graph)
    rules: RuleSet | None = None
    if options.use_rules or options.method == "rule-guided":
        rules = load_rules(store, graph, options.rules_path, max_len=options.rules_max_len,
                           cache_dir=options.cache_dir, threads=options.threads, log=log)
        log(f"rules: {rules.origin}")
    relations = [row["r"] for row in store.run("relation_counts", graph)]
    encoder = _encoder(options.embedding_model) if options.zero_shot_embeddings else None
    zero_shot = ZeroShotLinker(store, graph, relations, store.relation_labels(graph), encoder,
                               max_hops=options.hops)
    model: PathModel | None = None
    resolve = _resolver(linker)
    if options.train_paths:
        model = _learn(store, graph, options, resolve, rules, log, progress)
    labels = store.labels(graph)
    surface = SurfaceForms.from_store(store, graph, options.labels)
    answerer = OfflineAnswerer(store, graph, linker, RelationLinker(zero_shot, model, options.min_similarity),
                               rules, options.method, options.min_score, surface.entity, labels)
    if options.train_paths and rules is not None and rules.rules and options.calibrate:
        answerer.thresholds = calibrate(answerer, training_examples(options.train_paths, resolve))
        if answerer.thresholds:
            log("rule-candidate cuts learned on the training split: " + ", ".join(
                f"{step}={cut:g}" for step, cut in sorted(answerer.thresholds.items())))
    return answerer


def training_examples(paths: Sequence[Path], resolve: Callable[[str], str | None], per_pattern: int = 25
                      ) -> list[tuple[str, str | None, str, frozenset[str]]]:
    """(text, topic as written, topic id, gold ids) of the training questions, at most
    ``per_pattern`` per question pattern (file order), for calibrating the cuts."""
    from kgengine.rag.paths import pattern_of
    from kgengine.rag.relations import read_training

    seen: dict[str, int] = {}
    out = []
    for path in paths:
        for q in read_training(path):
            pattern = pattern_of(q.text, q.topic)
            if seen.get(pattern, 0) >= per_pattern:
                continue
            topic = resolve(q.topic)
            gold = frozenset(a for a in map(resolve, q.answers) if a is not None)
            if topic is None or not gold:
                continue
            seen[pattern] = seen.get(pattern, 0) + 1
            out.append((q.text, q.topic, topic, gold))
    return out


def _resolver(linker: GraphEntityLinker) -> Callable[[str], str | None]:
    """A surface form of a training file (id, private id or label) -> entity id, in memory."""
    surfaces = linker._surfaces  # noqa: SLF001 - the linker's own index, built once
    order = ("id", "private id", "label")

    def resolve(name: str) -> str | None:
        found = surfaces.get(name.casefold())
        if not found:
            return None
        exact = [c for c in found if c[0] == name]
        if exact:
            return exact[0][0]
        return min(found, key=lambda c: (order.index(c[1]), c[0]))[0]

    return resolve


def _learn(store: KGStore, graph: str, options: AskOptions, resolve: Callable[[str], str | None],
           rules: RuleSet | None, log: Log, progress: Callable[[int, int], None] | None) -> PathModel:
    adjacency = Adjacency(store.triples(graph))
    done = [0]

    def advance(n: int) -> None:
        done[0] += n
        if progress is not None:
            progress(done[0], 0)

    model = learn_model(store, graph, list(options.train_paths), adjacency, resolve, rules,
                        min_rule_confidence=LEARN_RULE_CONFIDENCE, max_hops=options.hops,
                        cache_dir=options.cache_dir, progress=advance)
    log(f"relation paths: {len(model.patterns)} patterns learned from {model.questions} training "
        f"questions ({model.skipped} skipped: topic or answers not in {graph!r}) in "
        + ", ".join(model.sources))
    return model


def _encoder(model: str | None) -> Callable[[Sequence[str]], np.ndarray]:
    from kgengine.rag.embeddings import load_encoder

    encoder = load_encoder(model)

    def encode(texts: Sequence[str]) -> np.ndarray:
        vectors = encoder.encode(texts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    return encode


def build_llm(store: KGStore, graph: str, options: AskOptions) -> Answerer:
    """The LLM methods, built by kgengine.rag.llm_methods from kgengine.llm's client and, for
    the KG methods (llm-kg, full), kgengine.rag.retrieval's k-hop retriever and
    kgengine.rag.selection's embedding selector (entities written per ``labels``)."""
    try:
        from kgengine.rag.llm_methods import KG_METHODS, build_llm_answerer
    except ImportError as exc:
        raise KGEngineError(
            f"method {options.method!r} needs kgengine.rag.llm_methods, which is not available "
            f"({exc}); use --method offline") from None
    from kgengine.llm.client import OpenAICompatibleLLM

    overrides: dict[str, Any] = {"model": options.llm_model, "base_url": options.llm_base_url,
                                 "api_key": options.llm_api_key, "timeout": options.llm_timeout,
                                 "cache_dir": options.llm_cache}
    llm = OpenAICompatibleLLM(**{k: v for k, v in overrides.items() if v is not None})
    retriever = selector = None
    if options.method in KG_METHODS:
        from kgengine.model import Direction
        from kgengine.rag.retrieval import KHopRetriever
        from kgengine.rag.selection import EmbeddingSelector

        retrieval: dict[str, Any] = {"hops": options.hops, "direction": Direction(options.direction)}
        if options.hub_cap is not None:
            retrieval["hub_cap"] = options.hub_cap
        retriever = KHopRetriever(store, graph, **retrieval)
        selector = EmbeddingSelector(store, graph, model=options.embedding_model, surface=options.labels)
    return build_llm_answerer(options.method, llm=llm, retriever=retriever, selector=selector,
                              top_k=options.top_k, linker=GraphEntityLinker(store, graph),
                              labels=options.labels, **options.extra)


def default_method() -> str:
    """``full`` when an LLM is configured (kgengine.llm's settings name a model), else
    ``offline``: every command works without an LLM."""
    try:
        from kgengine.llm.client import llm_configured
    except ImportError:
        return "offline"
    return "full" if llm_configured() else "offline"
