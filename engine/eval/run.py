"""What ``kgengine eval`` does, callable from Python: question sets -> settings -> resumable
answering -> reports. The answerers come from ``kgengine.rag.answerers.build_answerer``
(or any factory a caller passes)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kgengine.artifacts import file_digest
from kgengine.errors import KGEngineError
from kgengine.eval.ceiling import adjacency, answerable, within_hops
from kgengine.eval.protocols import (
    GraphSetting,
    Setting,
    expand,
    heldout_patterns,
    parse_graph_settings,
    parse_int_list,
    parse_sweeps,
    sample,
)
from kgengine.eval.report import write_reports
from kgengine.eval.runner import (
    RESULTS,
    AnswererFactory,
    ResultLog,
    check_extra,
    id_key,
    run_plan,
    store_factory,
)
from kgengine.model import Triple
from kgengine.questions import QuestionRecord, QuestionSet, load_question_set
from kgengine.rag.linking.patterns import pattern_of
from kgengine.rag.methods import Need, check_methods, method_spec, parse_key_values
from kgengine.store import KGStore

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class EvalRequest:
    question_specs: Sequence[str]
    out_dir: Path
    methods: Sequence[str] = ("offline",)
    split: str | None = None
    graph_specs: Sequence[str] = ()
    hops: str | None = None
    top_k: str | None = None
    train: Path | None = None
    sample: int | None = None
    seeds: str | None = None
    heldout_share: float | None = None
    heldout_seed: int = 0
    heldout_by: str = "pattern"  # "pattern": question text templates; "qtype": MetaQA question types
    ceiling: bool = True
    labels: str | None = None
    extra_options: Sequence[str] = ()
    sweeps: Sequence[str] = ()  # KEY=V1,V2,...: a method option swept like hops and top-k
    llm_concurrency: int = 1  # questions answered at once (an LLM server that batches)
    split_on_spaces: bool = False
    plots: bool = True
    answer_options: Mapping[str, Any] = field(default_factory=dict)  # Python callers: typed extras


# ---- MetaQA held-out patterns -----------------------------------------------------------------
HELDOUT_BY = ("pattern", "qtype")


def heldout_key(question: QuestionRecord, by: str) -> str | None:
    """What is held out: a question's text pattern (its text with the topic mention replaced,
    as the answerer learns it) or its MetaQA question type (a whole relation path: harder,
    the answerer never saw a question of that relation path)."""
    if by == "qtype":
        return question.pattern
    return pattern_of(question.question.text, question.question.topic_entity)


def heldout_set(qset: QuestionSet, share: float, seed: int, out_dir: Path,
                by: str = "pattern") -> QuestionSet:
    """Only test questions of a seeded share of patterns (``by``: text patterns or question
    types); the answerer learns from a copy of the training file without those patterns
    (written under ``out_dir/heldout``)."""
    if not qset.kind.heldout_patterns or qset.train is None:
        raise KGEngineError(f"--heldout-share: {qset.name} is not a set with held-out patterns and a "
                            "training split (MetaQA)")
    if by not in HELDOUT_BY:
        raise KGEngineError(f"--heldout-by {by!r}: choose one of {', '.join(HELDOUT_BY)}")
    train_questions = list(load_question_set(str(qset.train)).questions)
    patterns = [k for q in (*qset.questions, *train_questions) if (k := heldout_key(q, by))]
    if len(patterns) < len(qset.questions):
        raise KGEngineError(f"--heldout-share: {qset.name} has no question patterns (qtype files)")
    held = heldout_patterns(patterns, share, seed)
    hops = qset.meta.get("hops") or qset.questions[0].hops
    folder = out_dir / "heldout" / f"{hops}-hop"
    folder.mkdir(parents=True, exist_ok=True)
    kept_lines, kept_types = [], []
    source = qset.train.read_text(encoding="utf-8").splitlines()
    for q in train_questions:
        if heldout_key(q, by) not in held:
            line_no = int(q.source.rsplit(":", 1)[1])
            kept_lines.append(source[line_no - 1])
            kept_types.append(q.pattern or "")
    train = folder / "qa_dev.txt"
    train.write_text("".join(line + "\n" for line in kept_lines), encoding="utf-8")
    (folder / "qa_dev_qtype.txt").write_text("".join(t + "\n" for t in kept_types), encoding="utf-8")
    questions = tuple(q for q in qset.questions if heldout_key(q, by) in held)
    return replace(qset, name=f"{qset.name}/heldout", questions=questions, train=train,
                   meta={**qset.meta, "heldout_patterns": sorted(held), "heldout_seed": seed,
                         "heldout_share": share, "heldout_by": by, "train_questions": len(kept_lines)})


# ---- graphs -----------------------------------------------------------------------------------
def build_graphs(store: KGStore, qset: QuestionSet, log: Log) -> list[GraphSetting]:
    """A BRINK build's complete and incomplete KGs as graphs ``DIR-complete`` and
    ``DIR-incomplete`` (``DIR-FORM-...`` re-expressed in another surface form), loaded from
    its TSV files when the store lacks them."""
    from kgengine.loaders import read_dataset
    from kgengine.loaders.tsv import graph_name_for

    assert qset.build_dir is not None
    build_dir, mapping = qset.build_dir, qset.surface
    form = f"-{qset.meta['surface']}" if mapping is not None else ""
    out = []
    for variant in ("complete", "incomplete"):
        name = f"{graph_name_for(build_dir)}{form}-{variant}"
        path = build_dir / f"kg_{variant}.tsv"
        # the graph is this build's only if it was loaded from these very bytes
        source = f"{path.resolve()} sha256:{file_digest(path)[:16]}{form}"
        info = store.graph_info(name)
        if info is None or info.status != "complete" or info.source != source:
            if info is not None and info.status == "complete":
                log(f"graph {name!r} does not hold this build's {path.name} (another build or an edited "
                    "file): reloading it")
            triples = read_dataset("tsv", path).triples
            if mapping is not None:
                triples = [Triple(mapping.get(h, h), r, mapping.get(t, t)) for h, r, t in triples]
            store.load(name, triples, dataset=f"brink-{build_dir.name}", source=source, replace=True)
            log(f"loaded {path} as graph {name!r}")
        out.append(GraphSetting(variant, name))
    return out


def default_graphs(store: KGStore, sets: Sequence[QuestionSet], log: Log) -> list[GraphSetting]:
    builds = [s for s in sets if s.build_dir is not None]
    if len(builds) == 1 and len(sets) == 1:
        return build_graphs(store, builds[0], log)
    infos = [i for i in store.graphs() if i.status == "complete"]
    if len(infos) == 1:
        return [GraphSetting(infos[0].name, infos[0].name)]
    raise KGEngineError("choose the graph(s) to answer on with --graph NAME=GRAPH (graphs in the store: "
                        f"{', '.join(i.name for i in infos) or 'none'})")


class GraphIndex:
    """Per graph, its triples and undirected adjacency, built once from the store (for the
    MetaQA ceiling and the miss analysis; reads the KB, never given to an answerer)."""

    def __init__(self, store: KGStore) -> None:
        self.store = store
        self._triples: dict[str, set[tuple[str, str, str]]] = {}
        self._adjacency: dict[str, dict[str, set[str]]] = {}

    def triples(self, graph: str) -> set[tuple[str, str, str]]:
        if graph not in self._triples:
            self._triples[graph] = {tuple(t) for t in self.store.triples(graph)}  # type: ignore[misc]
        return self._triples[graph]

    def adjacency(self, graph: str) -> dict[str, set[str]]:
        if graph not in self._adjacency:
            self._adjacency[graph] = adjacency(self.triples(graph))
        return self._adjacency[graph]

    def reachable(self, graph: str, topic: str, hops: int) -> set[str]:
        return within_hops(self.adjacency(graph), topic, hops)

    def has_triple(self, graph: str, head: str, relation: str, tail: str) -> bool:
        return (head, relation, tail) in self.triples(graph)


# ---- the run ----------------------------------------------------------------------------------
def run_eval(store: KGStore, request: EvalRequest, factory: AnswererFactory | None = None,
             progress: bool = False, log: Log = _quiet) -> dict[str, Any]:
    out_dir = request.out_dir
    extra = {**parse_key_values(request.extra_options), **request.answer_options}
    sweeps = parse_sweeps(request.sweeps)
    if factory is None:  # refuse a typo before anything is loaded or answered
        check_methods(request.methods)
        check_extra(request.methods, extra, [k for k, _ in sweeps])
    out_dir.mkdir(parents=True, exist_ok=True)
    sets = [load_question_set(spec, request.split) for spec in request.question_specs]
    if request.train is not None:
        sets = [replace(s, train=request.train) for s in sets]
    if request.labels:
        from kgengine.eval.surface import reexpress_jsonl, reexpress_set

        sets = [reexpress_set(s, request.labels, log) for s in sets]
        for i, s in enumerate(sets):
            if s.surface is not None and s.train is not None and s.train.suffix == ".jsonl":
                moved = reexpress_jsonl(s.train, out_dir / f"train_{s.meta['surface']}.jsonl", s.surface)
                sets[i] = replace(s, train=moved)
    if request.heldout_share is not None:
        sets = [heldout_set(s, request.heldout_share, request.heldout_seed, out_dir, request.heldout_by)
                for s in sets]
    learns = [m for m in request.methods if Need.TRAINING in method_spec(m).needs] if factory is None else []
    for s in sets:
        if not s.questions:
            raise KGEngineError(f"question set {s.name} is empty")
        if s.train is None and learns:
            log(f"{s.name}: no training split ({s.kind.train_split} by convention; --train FILE gives one): "
                f"{', '.join(learns)} link relations zero-shot")
    by_name = {s.name: s for s in sets}
    if len(by_name) != len(sets):
        raise KGEngineError("the same question set is given twice")

    graphs = parse_graph_settings(request.graph_specs) if request.graph_specs else \
        default_graphs(store, sets, log)
    for g in graphs:
        store.require_graph(g.graph, complete=True)
    train = {s.name: s.train for s in sets}
    settings = expand([s.name for s in sets], graphs, request.methods,
                      parse_int_list(request.hops, "--hops"), parse_int_list(request.top_k, "--top-k"), train,
                      {s.name: s.kind.metric for s in sets}, sweeps)

    seeds = parse_int_list(request.seeds, "--seeds") if request.seeds else ([0] if request.sample else [])
    samples: dict[str, dict[int, list[QuestionRecord]]] = {}
    for s in sets:
        if request.sample or request.seeds:
            samples[s.name] = {seed: sample(s.questions, request.sample, seed)
                               for seed in seeds if seed is not None}
    plan: list[tuple[Setting, list[QuestionRecord]]] = []
    for setting in settings:
        qset = by_name[setting.questions]
        if setting.questions in samples:
            chosen = {id(q) for picked in samples[setting.questions].values() for q in picked}
            questions = [q for q in qset.questions if id(q) in chosen]
        else:
            questions = list(qset.questions)
        plan.append((setting, questions))

    (out_dir / "run.json").write_text(json.dumps(_request_json(request, settings), indent=2) + "\n",
                                      encoding="utf-8")
    results = ResultLog(out_dir / RESULTS)
    reusable = [results.done(s, q) is not None for s, qs in plan for q in qs]
    known = [(s.key, id_key(q.id)) in results.records for s, qs in plan for q in qs]
    already = sum(reusable)
    redone = sum(k and not r for r, k in zip(reusable, known, strict=True))
    if already or redone:
        log(f"resuming: {already:,} answers already in {out_dir / RESULTS}"
            + (f"; {redone:,} asked again (they had failed, or their question, gold, graph or training "
               "split changed)" if redone else ""))
    # the answerers' caches (mined rules, learned patterns, cuts) are kgengine.artifacts', keyed
    # by what they are computed from, never by -o: another run of the same build reuses them
    # (``--option cache_dir=DIR`` puts them under another cache root)
    with ExitStack() as resources:  # e.g. a local LLM server started for the run
        if request.llm_concurrency > 1:
            extra.setdefault("llm_concurrency", request.llm_concurrency)
        by_setting = run_plan(plan, factory or store_factory(store, extra, log, resources), results, progress,
                              workers=request.llm_concurrency)

    index = GraphIndex(store)
    ceilings: dict[str, float] = {}
    if request.ceiling:
        for setting, questions in plan:
            if by_name[setting.questions].kind.ceiling:
                # like the scores: over each seed's sample, then averaged
                groups = list(samples[setting.questions].values()) if setting.questions in samples \
                    else [questions]
                shares = [sum(f) / len(f) for f in (answerable(g, index.adjacency(setting.graph))
                                                     for g in groups)]
                ceilings[setting.key] = sum(shares) / len(shares)
    sample_ids = {setting.key: {seed: [q.id for q in picked]
                                for seed, picked in samples[setting.questions].items()}
                  for setting, _ in plan if setting.questions in samples}
    meta = {
        "question_sets": [s.name for s in sets],
        "question_set_info": {s.name: {"kind": s.kind.name, "metric": s.kind.metric,
                                       "questions": len(s.questions),
                                       "train": None if train[s.name] is None else str(train[s.name]),
                                       **{k: v for k, v in s.meta.items()}} for s in sets},
        "protocol": {"sample": request.sample, "seeds": seeds or None, "hops": request.hops,
                     "top_k": request.top_k, "heldout_share": request.heldout_share,
                     "split_on_spaces": request.split_on_spaces},
        "metrics": "strict BRINK (official evaluator semantics); hit@1 as KG-RAG §4.2.1; "
                   "permissive_* = substring matching (BRINK App. I), not strict",
    }
    plots = request.plots
    if plots and importlib.util.find_spec("matplotlib") is None:
        log("plots skipped: they need matplotlib (pip install 'kgengine[plots]'); --no-plots says so quietly")
        plots = False
    summary = write_reports(out_dir, by_setting, sample_ids, meta, kb=index, ceilings=ceilings,
                            split_on_spaces=request.split_on_spaces, plots=plots)
    return summary


def _request_json(request: EvalRequest, settings: Sequence[Setting]) -> dict[str, Any]:
    data = asdict(request)
    data = {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items()}
    data["settings"] = [s.key for s in settings]
    return data
