"""The method registry: every way of answering a question, by name (pykeen's class resolvers,
rdflib's plugins).

A method is one module that defines a :class:`MethodSpec` (its one-line summary, its own
options as a dataclass, what it needs, a builder) and one registration line: an entry of
:data:`BUILTIN_METHODS` (``name -> "module:attribute"``, imported only when used) or, for a
package outside kgengine, an entry point in the ``kgengine.methods`` group::

    [project.entry-points."kgengine.methods"]
    my-method = "my_package.module:SPEC"

``kgengine ask`` and ``kgengine eval`` take the list of methods, their help and their
options from here; settings every method shares (hops, top-k, labels, rules, training
files, the LLM endpoint) are :class:`AnswerSettings`, and a method's own settings its
``options`` dataclass, set with ``--option KEY=VALUE`` (checked against that dataclass)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kgengine.errors import KGEngineError
from kgengine.model import Triple
from kgengine.rag.base import DEFAULT_HOPS, DEFAULT_TOP_K, Answerer
from kgengine.rag.rules import DEFAULT_MAX_LEN
from kgengine.registry import Registry, instance_of
from kgengine.store import KGStore, resolve_graph
from kgengine.surface import Surface, parse_surface

if TYPE_CHECKING:  # the parts' modules are imported when a method first asks for them
    from kgengine.llm import LLM
    from kgengine.rag.graph.memory import MemoryGraphView
    from kgengine.rag.graph.view import GraphView
    from kgengine.rag.linking.entities import GraphEntityLinker
    from kgengine.rag.linking.learning import TrainingSplit
    from kgengine.rag.retrieval import KHopRetriever
    from kgengine.rag.rules import RuleSet
    from kgengine.rag.selection import EmbeddingSelector
    from kgengine.rag.verbalise import SurfaceForms

T = TypeVar("T")

# name -> "module:attribute" of its MethodSpec: the one place a built-in method is named
BUILTIN_METHODS: dict[str, str] = {
    "offline": "kgengine.rag.offline:OFFLINE",
    "rule-guided": "kgengine.rag.offline:RULE_GUIDED",
    "llm": "kgengine.rag.llm_methods:LLM_ONLY",
    "llm-qd": "kgengine.rag.llm_methods:LLM_QD",
    "llm-kg": "kgengine.rag.llm_methods:LLM_KG",
    "full": "kgengine.rag.llm_methods:FULL",
    "tog": "kgengine.rag.tog:TOG",
    "plan": "kgengine.rag.planning:PLAN",
}

Log = Callable[[str], None]
Progress = Callable[[int, int], None]


def _quiet(_: str) -> None:
    pass


class Need(StrEnum):
    """What a method needs besides the graph (said in ``--help`` and checked before building)."""

    LLM = "llm"  # an OpenAI-compatible endpoint
    EMBEDDINGS = "embeddings"  # the `rag` extra (sentence-transformers)
    RULES = "rules"  # mined rules (read from --rules, else mined on first use, cached)
    TRAINING = "training"  # uses a training split when given (--train)


@dataclass(frozen=True)
class NoOptions:
    """A method without settings of its own."""


@dataclass(frozen=True)
class AnswerSettings:
    """The settings every method shares: graph access, answer form, rules, training, LLM."""

    hops: int = DEFAULT_HOPS  # most hops of a relation path / retrieval depth
    top_k: int = DEFAULT_TOP_K  # triples put in front of an LLM
    labels: Surface = Surface.DATASET  # how entities are written in prompts and raw_output
    train_paths: tuple[Path, ...] = ()
    rules_path: Path | None = None  # None: mine the answered graph on first use (cached)
    rules_max_len: int = DEFAULT_MAX_LEN
    embedding_model: str | None = None  # sentence-transformers name or path
    cache_dir: Path | None = None  # the cache root (rules, paths, cuts, embeddings) [default: cache_root()]
    threads: int = 1  # mining on first use
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_cache: Path | None = None
    llm_timeout: float | None = None  # None: kgengine.llm's setting (environment, config, 120 s)
    llm_concurrency: int | None = None  # requests in flight at once (None: kgengine.llm's setting)
    question_timeout: float | None = None  # seconds one question may take (LLM methods), None: no limit

    def check(self) -> None:
        parse_surface(self.labels)
        if not 1 <= self.hops <= 3:
            raise KGEngineError(f"--hops must be 1, 2 or 3, got {self.hops}")
        if self.top_k < 1:
            raise KGEngineError(f"--top-k must be at least 1, got {self.top_k}")
        for path in (*self.train_paths, *([self.rules_path] if self.rules_path else [])):
            if not Path(path).is_file():
                raise KGEngineError(f"file {path} does not exist")


@dataclass(frozen=True)
class MethodSpec:
    """One answering method. ``build(context, options)`` returns its :class:`Answerer`;
    ``options`` is the dataclass of its own settings (defaults are what ``ask`` uses)."""

    summary: str
    build: Callable[[MethodContext, Any], Answerer]
    options: type = NoOptions
    needs: frozenset[Need] = frozenset()
    default_without_llm: bool = False  # the default method when no LLM is configured
    default_with_llm: bool = False  # ... and when one is

    def help(self, name: str) -> str:
        needs = f" [needs: {', '.join(sorted(self.needs))}]" if self.needs else ""
        keys = option_keys(self.options)
        return f"{name}: {self.summary}{needs}" + (f" (options: {', '.join(keys)})" if keys else "")


# ---- the registry -------------------------------------------------------------------------------
# every method: the built-ins, a package's (entry points `kgengine.methods`), one added at run
# time (register_method, e.g. by tests)
METHODS: Registry[MethodSpec] = Registry("method", "kgengine.methods", BUILTIN_METHODS,
                                         accepts=instance_of(MethodSpec), expected="a kgengine MethodSpec")


def register_method(name: str, spec: MethodSpec) -> None:
    """Add a method for this process (a package adds one for good with an entry point)."""
    METHODS.register(name, spec)


def unregister_method(name: str) -> None:
    METHODS.unregister(name)


def method_names() -> list[str]:
    """Every method: built-in first (in registration order), then plugins, then run-time ones."""
    return METHODS.names()


def method_spec(name: str) -> MethodSpec:
    return METHODS.get(name)


def check_methods(names: Sequence[str], option: str = "--method") -> None:
    unknown = [m for m in names if m not in method_names()]
    if unknown:
        raise KGEngineError(f"{option} {', '.join(unknown)}: unknown method (choose from "
                            f"{', '.join(method_names())})")


def default_method(with_llm: bool | None = None) -> str:
    """The method marked default when an LLM is configured (``with_llm``, else kgengine.llm's
    settings name a model), else the one marked default without: every command works
    without an LLM."""
    from kgengine.llm.settings import llm_configured

    with_llm = llm_configured() if with_llm is None else with_llm
    for name in method_names():
        spec = method_spec(name)
        if (spec.default_with_llm if with_llm else spec.default_without_llm):
            return name
    raise KGEngineError("no default method is registered")


def methods_help() -> str:
    return "; ".join(method_spec(name).help(name) for name in method_names())


# ---- options ------------------------------------------------------------------------------------
def option_keys(options: type) -> list[str]:
    return [f.name for f in fields(options)]


def _coerce(kind: Any, text: Any, where: str) -> Any:
    """``text`` (a string from the command line, or an already typed value from Python) as
    ``kind``, a field type of an options dataclass: bool, int, float, str, Path, an Enum,
    ``X | None``, ``tuple[X, ...]``."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if text is None or (isinstance(text, str) and text.lower() in ("none", "null", "")):
            return None
        return _coerce(args[0], text, where)
    if origin is tuple:
        (item, *_) = typing.get_args(kind)
        values = text if isinstance(text, (list, tuple)) else [v for v in str(text).split(",") if v]
        return tuple(_coerce(item, v, where) for v in values)
    if not isinstance(text, str):
        if kind is float and isinstance(text, int) and not isinstance(text, bool):
            return float(text)
        if isinstance(kind, type) and isinstance(text, kind):
            return text
        if kind is Path and isinstance(text, Path):
            return text
        text = str(text)
    try:
        if kind is bool:
            lowered = text.strip().lower()
            if lowered in ("true", "yes", "1", "on"):
                return True
            if lowered in ("false", "no", "0", "off"):
                return False
            raise ValueError
        if kind in (int, float, str, Path) or (isinstance(kind, type) and issubclass(kind, StrEnum)):
            return kind(text)
    except ValueError:
        name = getattr(kind, "__name__", str(kind))
        raise KGEngineError(f"{where}: {text!r} is not a {name}") from None
    raise KGEngineError(f"{where}: unsupported option type {kind!r}")


def make_options(options: type, values: Mapping[str, Any], where: str) -> Any:
    """An instance of the dataclass ``options`` from ``values`` (strings or typed values);
    an unknown key or a value of the wrong type is a one-line error naming ``where`` and
    the valid keys."""
    hints = typing.get_type_hints(options)
    known = option_keys(options)
    unknown = [k for k in values if k not in known]
    if unknown:
        raise KGEngineError(f"{where}: unknown option {', '.join(unknown)} "
                            f"(valid: {', '.join(known) or 'none'})")
    typed = {k: _coerce(hints[k], v, f"{where} {k}") for k, v in values.items()}
    try:
        instance = options(**typed)
    except (TypeError, ValueError) as exc:
        raise KGEngineError(f"{where}: {exc}") from None
    check = getattr(instance, "check", None)
    if callable(check):
        check()
    return instance


def parse_key_values(values: Sequence[str], option: str = "--option") -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key.strip():
            raise KGEngineError(f"{option} {value!r}: expected KEY=VALUE")
        out[key.strip()] = text
    return out


SHARED_KEYS = tuple(option_keys(AnswerSettings))


def split_options(method: str, values: Mapping[str, Any], *, strict: bool = True
                  ) -> tuple[dict[str, Any], Any]:
    """``values`` (KEY=VALUE settings) cut into the shared settings' part and ``method``'s own
    options instance. ``strict``: a key that is neither is an error (``eval`` sweeping
    several methods passes ``strict=False`` for keys another of its methods knows)."""
    spec = method_spec(method)
    own = set(option_keys(spec.options))
    shared = {k: v for k, v in values.items() if k in SHARED_KEYS and k not in own}
    mine = {k: v for k, v in values.items() if k in own}
    rest = [k for k in values if k not in shared and k not in mine]
    if rest and strict:
        raise KGEngineError(f"--option {', '.join(rest)}: not an option of method {method!r} (its options: "
                            f"{', '.join(sorted(own)) or 'none'}; shared: {', '.join(SHARED_KEYS)})")
    return shared, make_options(spec.options, mine, f"--option (method {method})")


def settings_with(settings: AnswerSettings, values: Mapping[str, Any]) -> AnswerSettings:
    """``settings`` with some fields replaced by (possibly textual) values."""
    typed = make_options(AnswerSettings, {**_fields_of(settings), **values}, "--option")
    return typed


def _fields_of(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in fields(instance)}


# ---- building -----------------------------------------------------------------------------------
# The graph is read into memory for the answerers' later questions (a batch: reading it once is
# cheaper than thousands of queries; FB15k-237's BRINK test split: 212 s warm before, most of it
# rule queries) when it has at most IN_MEMORY_MAX_TRIPLES (about 0.5 kB a triple), after
# IN_MEMORY_AFTER questions (one `kgengine ask` never reads the whole graph).
IN_MEMORY_AFTER = 1
IN_MEMORY_MAX_TRIPLES = 2_000_000


@dataclass
class MethodContext:
    """What a method's builder gets: the graph and the shared settings, and the shared parts,
    each built on demand and once: the graph view, entity linker, rules, the training split,
    surface forms, LLM, retriever, selector. Resources that must be released (a local LLM
    server) go on ``resources``; a caller may give its own ``llm``."""

    store: KGStore
    graph: str
    method: str
    settings: AnswerSettings = AnswerSettings()
    log: Log = _quiet
    progress: Progress | None = None
    resources: ExitStack = field(default_factory=ExitStack)
    given_llm: LLM | None = None
    _built: dict[str, object] = field(default_factory=dict, repr=False)
    _view: GraphView | None = field(default=None, repr=False)

    def _once(self, key: str, kind: type[T], make: Callable[[], T]) -> T:
        if key not in self._built:
            self._built[key] = make()
        found = self._built[key]
        assert isinstance(found, kind)
        return found

    def graph_view(self) -> GraphView:
        """How the answerer reads the graph, chosen once: in memory when it is there already
        (learning read it), else the store's named queries, handing over to the graph in
        memory after the first question where it fits (:class:`HandoverGraphView`)."""
        from kgengine.rag.graph.store import StoreGraphView
        from kgengine.rag.graph.view import HandoverGraphView

        if self._view is None:
            if "memory_view" in self._built:  # learning read the graph
                self._view = self.memory_view()
            else:
                store_view = StoreGraphView(self.store, self.graph)
                info = self.store.graph_info(self.graph)
                fits = info is not None and info.triples <= IN_MEMORY_MAX_TRIPLES
                self._view = (HandoverGraphView(store_view, self.memory_view, after=IN_MEMORY_AFTER)
                              if fits else store_view)
        return self._view

    def memory_view(self) -> MemoryGraphView:
        """The graph in memory (learning paths, planning, a batch's later questions)."""
        from kgengine.rag.graph.memory import GraphAdjacency, MemoryGraphView

        return self._once("memory_view", MemoryGraphView,
                          lambda: MemoryGraphView(GraphAdjacency(self._facts()), self.store.order_key))

    def _facts(self) -> Iterable[Triple]:
        """The graph's facts: from the mining index persisted at load when it is current (a
        memory-mapped file: no store read), else from the store."""
        from kgengine.mining.index import load_index

        index = load_index(self.store, self.graph)
        return index.iter_triples() if index is not None else self.store.triples(self.graph)

    def linker(self) -> GraphEntityLinker:
        from kgengine.rag.linking.entities import GraphEntityLinker

        return self._once("linker", GraphEntityLinker, lambda: GraphEntityLinker(self.store, self.graph))

    def rules(self) -> RuleSet:
        from kgengine.rag.rules import RuleSet, load_rules

        def make() -> RuleSet:
            s = self.settings
            rules = load_rules(self.store, self.graph, s.rules_path, max_len=s.rules_max_len,
                               cache_dir=s.cache_dir, threads=s.threads, log=self.log)
            self.log(f"rules: {rules.description}")
            return rules

        return self._once("rules", RuleSet, make)

    def training_split(self) -> TrainingSplit:
        """The training files' questions, read once, resolved on the graph by the entity linker."""
        from kgengine.rag.linking.learning import TrainingSplit, read_training_split

        return self._once("training", TrainingSplit,
                          lambda: read_training_split(self.settings.train_paths, self.linker().lookup))

    def surface(self) -> SurfaceForms:
        from kgengine.rag.verbalise import SurfaceForms

        return self._once("surface", SurfaceForms, lambda: SurfaceForms.from_store(self.store, self.graph,
                                                                                   self.settings.labels))

    def llm(self) -> LLM:
        """The LLM given, else the configured OpenAI-compatible endpoint; with none configured
        and the ``local-llm`` extra installed, the packaged model started for this run
        (stopped when ``resources`` closes; said on the log)."""
        if self.given_llm is not None:
            return self.given_llm
        from kgengine.llm.client import OpenAICompatibleLLM
        from kgengine.llm.local import local_endpoint

        def make() -> OpenAICompatibleLLM:
            s = self.settings
            overrides: dict[str, Any] = {"model": s.llm_model, "base_url": s.llm_base_url,
                                         "api_key": s.llm_api_key, "timeout": s.llm_timeout,
                                         "cache_dir": s.llm_cache, "concurrency": s.llm_concurrency}
            given = s.llm_model is not None or s.llm_base_url is not None
            local = self.resources.enter_context(local_endpoint(self.log, configured=given or None))
            if local is not None:
                overrides = {**local.client_options(), **{k: v for k, v in overrides.items()
                                                            if k not in ("model", "base_url", "api_key")}}
            llm = OpenAICompatibleLLM(**{k: v for k, v in overrides.items() if v is not None})
            llm.check()  # a dead endpoint fails here, not after the preparation or per question
            return llm

        return self._once("llm", OpenAICompatibleLLM, make)

    def retriever(self, direction: str = "both", hub_cap: int | None = None) -> KHopRetriever:
        from kgengine.model import Direction
        from kgengine.rag.retrieval import KHopRetriever

        def make() -> KHopRetriever:
            retrieval: dict[str, Any] = {"hops": self.settings.hops, "direction": Direction(direction)}
            if hub_cap is not None:
                retrieval["hub_cap"] = hub_cap
            return KHopRetriever(self.store, self.graph, **retrieval)

        return self._once(f"retriever/{direction}/{hub_cap}", KHopRetriever, make)

    def selector(self, whole_graph: bool = False) -> EmbeddingSelector:
        """Embedding top-K selection. The triples a question retrieves are embedded when first
        met and remembered (per triple); ``whole_graph`` embeds the whole graph first into the
        on-disk cache (worth it for many questions over one graph)."""
        from kgengine.rag.selection import EmbeddingSelector

        root = self.settings.cache_dir  # the cache root the user chose, else kgengine.artifacts' own
        return self._once(f"selector/{whole_graph}", EmbeddingSelector, lambda: EmbeddingSelector(
            self.store, self.graph, model=self.settings.embedding_model, surface=self.settings.labels,
            build=whole_graph, cache_dir=root / "embeddings" if root is not None else None))


def build_answerer(store: KGStore, graph: str | None, method: str,
                   settings: AnswerSettings = AnswerSettings(), options: Any = None, *,
                   log: Log = _quiet, progress: Progress | None = None,
                   resources: ExitStack | None = None, llm: LLM | None = None) -> Answerer:
    """The answerer of ``method`` for ``graph`` of ``store``. ``options``: the method's own
    options (an instance of its dataclass, a mapping of KEY=VALUE settings, or None for its
    defaults). ``llm``: an :class:`kgengine.llm.LLM` to use instead of the configured endpoint
    (a Python user's own client, a benchmark's uncached one). ``log`` receives one-line notes
    (rules mined or read from the cache, patterns learned); ``progress(done, total)`` is called
    during long preparation."""
    spec = method_spec(method)
    settings.check()
    if options is None or isinstance(options, Mapping):
        options = make_options(spec.options, dict(options or {}), f"--option (method {method})")
    elif not isinstance(options, spec.options):
        raise KGEngineError(f"method {method!r} takes {spec.options.__name__} options, not "
                            f"{type(options).__name__}")
    graph = resolve_graph(store, graph)  # the graph named, or the store's only one
    context = MethodContext(store, graph, method, settings, log, progress,
                            resources if resources is not None else ExitStack(), llm)
    return spec.build(context, options)


def replace_options(options: Any, **changes: Any) -> Any:
    return dataclasses.replace(options, **changes)
