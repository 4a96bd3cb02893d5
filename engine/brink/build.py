"""``kgengine brink build``: from a graph in the store and a rule list to a BRINK dataset
directory. The store is reached only through the store protocol and
:func:`kgengine.mining.groundings.groundings`, so either backend works; the decisions are in
the pure modules (removal, questions, templates, report)."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from threading import Lock
from typing import Any

from kgengine.brink.answerability import Answerability, check_answerability, surface_triple
from kgengine.brink.question_writer import LLMQuestionWriter
from kgengine.brink.questions import (
    SPLITS,
    AnswerIndex,
    QuestionItem,
    QuestionUnit,
    balance,
    make_items,
    mentions,
    split,
    surface_forms,
)
from kgengine.brink.removal import (
    Grounding,
    KGWithout,
    Removal,
    Selection,
    ground,
    removal_violations,
    remove,
    rule_rng,
    rule_sample_order,
    select,
)
from kgengine.brink.report import markdown, question_counts, rule_type_counts
from kgengine.errors import InvalidParameterError, KGEngineError
from kgengine.mining.groundings import HeadFilter, groundings
from kgengine.mining.io import MinedRule
from kgengine.mining.presets import mine_brink_rules
from kgengine.mining.rules import Rule
from kgengine.model import Triple
from kgengine.progress import progress_bar
from kgengine.store import KGStore, open_store, resolve_graph
from kgengine.surface import Surface
from kgengine.wording import template_question

OUTPUT_FILES = ("kg_complete.tsv", "kg_incomplete.tsv", *(f"questions_{s}.jsonl" for s in SPLITS),
                "rules.tsv", "stats.json", "stats.md")


class AnswerabilityError(KGEngineError):
    """Some removed triple is not re-derivable from the incomplete KG (files are written)."""


@dataclass(frozen=True)
class BuildOptions:
    groundings_per_rule: int = 30
    selection: Selection = Selection.SAMPLE
    unit: QuestionUnit = QuestionUnit.TRIPLE
    tau: float = 0.01
    seed: int = 0
    labels: Surface = Surface.PRIVATE
    relation_labels: Mapping[str, str] = field(default_factory=dict)
    max_candidates: int | None = 200_000  # per rule, for the uniform sample (None: no cap)
    max_rules: int | None = None  # ground only this many rules (with groundings), drawn seeded
    workers: int = 1  # concurrent grounding queries
    load_as: str | None = None  # load <name>-complete / <name>-incomplete into the store
    replace: bool = False  # replace those graphs if they exist

    def settings(self) -> dict[str, Any]:
        out = asdict(self)
        out["relation_labels"] = len(self.relation_labels)
        return {k: (v.value if hasattr(v, "value") else v) for k, v in out.items()}


@dataclass
class BuildResult:
    out_dir: Path
    stats: dict[str, Any]
    answerability: Answerability
    removal: Removal
    splits: dict[str, list[QuestionItem]]
    surface: dict[str, str]


Log = Callable[[str], None]


def mine_rules(store: KGStore, graph: str, max_len: int, threads: int) -> list[MinedRule]:
    """Mine ``graph`` (or the store's only one) with BRINK's AMIE 3 settings (App. A.2)."""
    return mine_brink_rules(store, resolve_graph(store, graph), max_len, threads)


def read_relation_labels(path: Path) -> dict[str, str]:
    """A ``relation<TAB>label`` TSV (``--relation-labels``) that words template questions;
    blank lines and ``#`` comments are skipped, a later line for a relation wins."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KGEngineError(f"cannot read relation labels {path}: {exc}") from None
    out = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise KGEngineError(f"{path}:{number}: expected 'relation<TAB>label'")
        out[fields[0]] = fields[1].strip()
    return out


def _noop(_: str) -> None:
    pass


# ---- groundings ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RuleSelection:
    selected: list[Grounding]
    candidates: int | None  # groundings with body and head in the KG; None: not all counted
    capped: bool = False  # more than max_candidates: sampled from the first max_candidates
    seconds: float = 0.0  # time of the grounding queries (stats.json lists the slowest rules)
    drawn: bool = True  # False: not drawn by --max-rules (never grounded)


NOT_DRAWN = RuleSelection([], None, drawn=False)


def rule_groundings(store: KGStore, graph: str, index: int, rule: Rule, options: BuildOptions
                    ) -> RuleSelection:
    started = time.perf_counter()
    selection = _select_groundings(store, graph, index, rule, options)
    return replace(selection, seconds=time.perf_counter() - started)


def _select_groundings(store: KGStore, graph: str, index: int, rule: Rule, options: BuildOptions
                       ) -> RuleSelection:
    n = options.groundings_per_rule
    rng = rule_rng(options.seed, rule)
    if options.selection == Selection.SAMPLE:
        # a uniform sample needs every grounding; past max_candidates the rows would not fit
        # in memory, so the sample comes from the first max_candidates in query order
        cap = options.max_candidates
        rows = groundings(store, graph, rule, head=HeadFilter.WITH, limit=cap + 1 if cap else None)
        capped = cap is not None and len(rows) > cap
        candidates = [ground(index, rule, row) for row in (rows[:cap] if capped else rows)]
        return RuleSelection(select(candidates, n, options.selection, rng),
                             None if capped else len(candidates), capped)
    # first N in query order: fetch a little more than N, more again if self-body
    # groundings (skipped) leave fewer than N eligible
    limit = n * 2
    while True:
        rows = groundings(store, graph, rule, head=HeadFilter.WITH, limit=limit)
        chosen = select([ground(index, rule, row) for row in rows], n, options.selection, rng)
        if len(chosen) >= n or len(rows) < limit:
            return RuleSelection(chosen, len(rows) if len(rows) < limit else None)
        limit *= 4


def all_groundings(store: KGStore, graph: str, rules: Sequence[Rule], options: BuildOptions,
                   progress: bool, log: Log) -> list[RuleSelection]:
    """Every rule's selection; with ``max_rules``, rules are drawn in the seeded rule order until
    ``max_rules`` of them have a grounding (the rules after that are not grounded at all)."""
    wanted = len(rules) if options.max_rules is None else min(options.max_rules, len(rules))
    done = [0]
    lock = Lock()
    step = max(1, wanted // 10)
    with progress_bar("grounding rules", total=wanted, enabled=progress) as bar:
        def one(index: int) -> RuleSelection:
            result = rule_groundings(store, graph, index, rules[index], options)
            bar.advance()
            with lock:  # big rule sets take long: a line per tenth also where no bar shows
                done[0] += 1
                if not progress and done[0] % step == 0 and wanted >= 100:
                    log(f"grounded {done[0]:,} of {wanted:,} rules")
            return result

        with ThreadPoolExecutor(max(1, options.workers)) as pool:
            if options.max_rules is None:
                return list(pool.map(one, range(len(rules))))
            # Rounds of as many rules as are still missing, in the seeded order: the rules
            # taken are the same whatever the number of workers.
            selections = [NOT_DRAWN] * len(rules)
            order = rule_sample_order(rules, options.seed)
            position, have = 0, 0
            while have < wanted and position < len(order):
                batch = order[position:position + wanted - have]
                position += len(batch)
                for index, result in zip(batch, pool.map(one, batch), strict=True):
                    if have == wanted:  # the round's later rules are not taken
                        break
                    selections[index] = result  # drawn, with or without groundings
                    have += bool(result.selected)
            return selections


# ---- questions ----------------------------------------------------------------------------
def template_for(item: QuestionItem, surface: Mapping[str, str], relation_labels: Mapping[str, str]) -> str:
    return template_question(item.triple.relation, item.direction, surface[item.topic],
                             relation_labels.get(item.triple.relation))


def llm_questions(
    items: Sequence[QuestionItem],
    templates: Sequence[str],
    answers: Mapping[QuestionItem, Sequence[str]],
    surface: Mapping[str, str],
    writer: LLMQuestionWriter,
    llm_workers: int,
    progress: bool,
) -> list[tuple[str, str]]:
    """(question, source) per item: the LLM's checked question, or the item's template when
    every attempt was rejected."""
    with progress_bar("LLM questions", total=len(items), enabled=progress) as bar:
        def one(pair: tuple[QuestionItem, str]) -> tuple[str, str]:
            item, template = pair
            h, r, t = surface_triple(item.triple, surface)
            text = writer.question(h, r, t, surface[item.topic], surface[item.answer],
                                   [surface[a] for a in answers[item]])
            bar.advance()
            return (text, "llm") if text is not None else (template, "template-fallback")

        with ThreadPoolExecutor(max(1, llm_workers)) as pool:
            return list(pool.map(one, zip(items, templates, strict=True)))


def question_record(
    qid: str, item: QuestionItem, text: str, source: str, answers: Iterable[str],
    rules: Sequence[Rule], surface: Mapping[str, str],
) -> dict[str, Any]:
    def path(g: Grounding) -> list[list[str]]:
        return [list(surface_triple(t, surface)) for t in g.body]

    primary = item.paths[0]
    return {
        "id": qid,
        "question": text,
        "topic_entity": surface[item.topic],
        "answers": sorted(surface[a] for a in answers),
        "hard_answer": surface[item.answer],
        "relation": item.triple.relation,
        "direction": item.direction.value,
        "removed_triple": list(surface_triple(item.triple, surface)),
        "rule": str(rules[primary.rule]),
        "rule_type": rules[primary.rule].rule_type.value,
        "alternative_path": path(primary),
        "paths": [{"rule": str(rules[g.rule]), "rule_type": rules[g.rule].rule_type.value,
                   "path": path(g)} for g in item.paths],
        "question_source": source,
    }


# ---- files --------------------------------------------------------------------------------
def write_kg(path: Path, triples: Iterable[Triple], surface: Mapping[str, str]) -> None:
    """One sorted TAB line per triple. Sorted as tuples, the order of the lines (TAB sorts
    before any character of a name), without a second copy of the KG as strings."""
    ordered = sorted(surface_triple(t, surface) for t in triples)
    with path.open("w", encoding="utf-8") as fh:
        for start in range(0, len(ordered), 1 << 16):
            fh.write("".join("\t".join(t) + "\n" for t in ordered[start : start + (1 << 16)]))


MEASURES = ("support", "head_coverage", "std_confidence", "pca_confidence", "body_size",
            "pca_body_size", "functional_variable")


def write_rules(path: Path, inputs: Sequence[Rule | MinedRule], selections: Sequence[RuleSelection],
                kept: Sequence[Grounding], questions: Counter[int]) -> None:
    """rules.tsv: the reference's body/head columns (so ``kgengine.mining.io.read_rules``
    reads it back), the AMIE measures when the rules came with them, and what each rule
    contributed: candidate groundings (blank: not all counted), whether the sample was capped,
    selected, kept, distinct removed triples, questions. (Nothing time-dependent: a rebuild
    with the same seed writes the same bytes; query times go to stats.json.)"""
    kept_by_rule = Counter(g.rule for g in kept)
    removed_by_rule = Counter(rule for rule, _ in {(g.rule, g.head) for g in kept})
    header = ["rule_index", "body", "head", "rule_type", *MEASURES, "drawn", "groundings", "capped",
              "selected", "kept", "removed", "questions"]
    lines = ["\t".join(header)]
    for i, item in enumerate(inputs):
        rule = item.rule if isinstance(item, MinedRule) else item
        measures = [str(getattr(item, k)) if isinstance(item, MinedRule) else "" for k in MEASURES]
        lines.append("\t".join([
            str(i), " & ".join(str(a) for a in rule.body), str(rule.head), rule.rule_type.value,
            *measures, "yes" if selections[i].drawn else "",
            "" if selections[i].candidates is None else str(selections[i].candidates),
            "yes" if selections[i].capped else "", str(len(selections[i].selected)),
            str(kept_by_rule[i]), str(removed_by_rule[i]), str(questions[i]),
        ]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def write_entities(path: Path, store: KGStore, graph: str, entities: Iterable[str]) -> None:
    """entities.tsv: ``private_id<TAB>dataset_id<TAB>label`` per entity of the complete KG
    (label blank where there is none), so ``kgengine eval`` can re-express a question set
    in any surface form."""
    private, labels = store.private_ids(graph), store.labels(graph)

    def clean(text: str) -> str:
        return " ".join(text.split())  # a TAB or newline in a label would break the row

    rows = [f"{private.get(e, '')}\t{e}\t{clean(labels.get(e, ''))}" for e in sorted(entities)]
    path.write_text("private_id\tdataset_id\tlabel\n" + "".join(r + "\n" for r in rows), encoding="utf-8")


# ---- the build ----------------------------------------------------------------------------
def build_brink(
    store: KGStore,
    graph: str,
    inputs: Sequence[Rule | MinedRule],
    out_dir: Path,
    options: BuildOptions = BuildOptions(),
    writer: LLMQuestionWriter | None = None,
    llm_workers: int = 4,
    progress: bool = False,
    log: Log = _noop,
) -> BuildResult:
    """Build the dataset into ``out_dir``; raises :class:`AnswerabilityError` (after writing
    every file, so the failures can be inspected) when the App. H check is below 100%."""
    started = time.perf_counter()
    info = store.require_graph(graph)
    if options.groundings_per_rule < 1:
        raise InvalidParameterError("--groundings-per-rule must be at least 1")
    rules = [r.rule if isinstance(r, MinedRule) else r for r in inputs]
    complete = set(store.triples(graph))
    log(f"{graph}: {len(complete):,} triples, {len(rules):,} rules")

    selections = all_groundings(store, graph, rules, options, progress, log)
    removal = remove(g for s in selections for g in s.selected)
    incomplete = KGWithout(complete, removal.removed)
    problems = removal_violations(complete, incomplete, removal)
    if problems:  # a bug, never bad input: say what broke
        raise KGEngineError("removal broke BRINK's constraints: " + "; ".join(problems[:5]))
    log(f"removed {len(removal.removed):,} triples ({len(removal.kept):,} groundings kept, "
        f"{len(removal.conflicts):,} dropped as conflicts)")

    entities = {e for t in complete for e in (t.head, t.tail)}
    surface = surface_forms(
        entities, options.labels,
        private_ids=store.private_ids(graph) if options.labels == Surface.PRIVATE else None,
        labels=store.labels(graph) if options.labels == Surface.TEXT else None,
    )

    # canonical order (removed triple, rule text, path): ids, primary paths and every later
    # choice do not depend on the order of the rule file (mined or read, the same dataset)
    kept = sorted(removal.kept, key=lambda g: (g.head, str(rules[g.rule]), g.body))
    items = make_items(kept, options.unit, options.seed)
    # a question must name its topic and not its answer. The template does, unless the
    # answer's name is inside the topic's or the relation's words (text labels: "USA" in
    # "USA Today"; a self-loop): such an item cannot be asked safely and goes before
    # balancing, so τ·|Q| counts only real questions. The template is also the LLM's fallback.
    index = AnswerIndex(complete, items)
    answers = {item: index.answers(item) for item in items}
    template = {item: template_for(item, surface, options.relation_labels) for item in items}
    askable = [i for i in items if not any(mentions(template[i], surface[a]) for a in answers[i])]
    balanced = balance(askable, options.tau, options.seed)
    splits = split(balanced, options.seed)
    qid = {item: f"q{n:05d}" for n, item in enumerate(balanced)}  # stable, split-blind ids

    ordered = [item for name in SPLITS for item in splits[name]]
    if writer is None:
        texts = [(template[item], "template") for item in ordered]
    else:
        texts = llm_questions(ordered, [template[i] for i in ordered], answers, surface, writer,
                              llm_workers, progress)
    question_records = [
        question_record(qid[item], item, text, source, answers[item], rules, surface)
        for item, (text, source) in zip(ordered, texts, strict=True)
    ]
    leaking = [r["id"] for r in question_records if not mentions(r["question"], r["topic_entity"])
               or any(mentions(r["question"], a) for a in r["answers"])]
    if leaking:  # templates cannot do this and LLM output is checked: a bug
        raise KGEngineError(f"questions name their answer or miss their topic: {leaking[:5]}")

    out_dir.mkdir(parents=True, exist_ok=True)
    write_kg(out_dir / "kg_complete.tsv", complete, surface)
    write_kg(out_dir / "kg_incomplete.tsv", incomplete, surface)
    position = 0
    for name in SPLITS:
        count = len(splits[name])
        write_jsonl(out_dir / f"questions_{name}.jsonl", question_records[position:position + count])
        position += count
    write_rules(out_dir / "rules.tsv", inputs, selections, removal.kept,
                Counter(item.paths[0].rule for item in ordered))
    write_entities(out_dir / "entities.tsv", store, graph, entities)

    answerability = _answerability(store, graph, info.dataset, rules, removal, complete, incomplete,
                                   surface, options, out_dir, progress, log)

    stats = _stats(store, graph, info.dataset, options, writer, rules, selections, removal,
                   complete, incomplete, splits, items, askable, balanced, question_records, texts,
                   answerability, started)
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    (out_dir / "stats.md").write_text(markdown(stats), encoding="utf-8")
    if answerability.fraction < 1.0:
        first = answerability.failures[0]
        raise AnswerabilityError(
            f"answerability check failed: only {answerability.rederived:,} of "
            f"{answerability.checked:,} kept groundings ({answerability.fraction:.2%}) have their "
            f"removed triple re-derived from the incomplete KG by their rule; e.g. {tuple(first[0])} "
            f"is not derived by {first[1]} (details in {out_dir / 'stats.json'})"
        )
    return BuildResult(out_dir, stats, answerability, removal, splits, surface)


def _stats(store: KGStore, graph: str, dataset: str, options: BuildOptions,
           writer: LLMQuestionWriter | None, rules: Sequence[Rule], selections: Sequence[RuleSelection],
           removal: Removal, complete: set[Triple],
           incomplete: KGWithout, splits: Mapping[str, Sequence[QuestionItem]],
           items: Sequence[QuestionItem], askable: Sequence[QuestionItem],
           balanced: Sequence[QuestionItem], records: Sequence[Mapping[str, Any]],
           texts: Sequence[tuple[str, str]], answerability: Answerability, started: float,
           ) -> dict[str, Any]:
    """stats.json: the paper's Tables 1 and 3 for this build plus the construction funnel."""
    answer_counts = [len(r["answers"]) for r in records]
    stats: dict[str, Any] = {
        "graph": graph,
        "dataset": dataset,
        "backend": store.backend,
        "settings": options.settings() | {"questions": "llm" if writer else "template"},
        "rules": {
            "by_type": rule_type_counts(rules),
            "drawn": sum(1 for s in selections if s.drawn),
            "with_groundings": sum(1 for s in selections if s.selected),
            "contributing_questions": len({item.paths[0].rule for item in balanced}),
        },
        "groundings": {
            "candidates": (None if any(s.candidates is None for s in selections if s.drawn)
                           else sum(s.candidates or 0 for s in selections)),
            "capped_rules": sum(1 for s in selections if s.capped),
            "query_seconds": round(sum(s.seconds for s in selections), 2),
            "slowest_rules": [{"rule": str(rules[i]), "seconds": round(selections[i].seconds, 2)}
                              for i in sorted(range(len(rules)), key=lambda i: -selections[i].seconds)[:10]],
            "selected": len(removal.selected),
            "conflicts": len(removal.conflicts),
            "kept": len(removal.kept),
        },
        "triples": {"complete": len(complete), "incomplete": len(incomplete),
                    "removed": len(removal.removed)},
        "questions": {
            **question_counts(splits, rules),
            "items": len(items),
            "unaskable": len(items) - len(askable),
            "balanced_away": len(askable) - len(balanced),
            "answers_mean": sum(answer_counts) / len(answer_counts) if answer_counts else 0.0,
            "multi_answer": sum(1 for n in answer_counts if n > 1),
            "by_source": dict(Counter(source for _, source in texts)),
        },
        "answerability": answerability.as_dict(),
        "seconds": round(time.perf_counter() - started, 2),
    }
    if writer is not None:
        stats["llm"] = writer.stats.as_dict()
    return stats


class _Published:
    """The surface triples of a KG, re-iterable (a load reads its input twice) and never
    held as a list: the checker's scratch store does not need them sorted."""

    def __init__(self, triples: Iterable[Triple], surface: Mapping[str, str]) -> None:
        self.triples, self.surface = triples, surface

    def __iter__(self) -> Iterator[Triple]:
        return (surface_triple(t, self.surface) for t in self.triples)


def _answerability(store: KGStore, graph: str, dataset: str, rules: Sequence[Rule], removal: Removal,
                   complete: set[Triple], incomplete: KGWithout, surface: Mapping[str, str],
                   options: BuildOptions, out_dir: Path, progress: bool, log: Log) -> Answerability:
    """Load the published KGs into the store (``--load``) and check there, or check in a
    throwaway embedded Oxigraph store holding the incomplete KG."""

    def published(triples: Iterable[Triple]) -> list[Triple]:
        return sorted(surface_triple(t, surface) for t in triples)

    def run(check_store: KGStore, check_graph: str) -> Answerability:
        queries = len({(g.rule, g.head.head) for g in removal.kept})
        with progress_bar("answerability", total=queries, enabled=progress) as bar:
            result = check_answerability(check_store, check_graph, rules, removal.kept, surface,
                                         options.workers, bar.advance)
        log(f"answerability: {result.rederived:,}/{result.checked:,} re-derived ({result.fraction:.1%})")
        return result

    if options.load_as:
        # with dataset ids the source graph's labels still fit; private ids and text labels
        # are the entity ids of the published graphs themselves
        labels = store.labels(graph).items() if options.labels == Surface.DATASET else ()
        names = {}
        for variant, triples in (("complete", complete), ("incomplete", incomplete)):
            name = f"{options.load_as}-{variant}"
            store.load(name, published(triples), dataset=f"brink-{dataset}", labels=labels,
                       source=str(out_dir), replace=options.replace, seed=options.seed)
            names[variant] = name
            log(f"loaded graph {name!r} ({len(triples):,} triples)")
        return run(store, names["incomplete"])

    # the checker's scratch store: an embedded store in a temporary directory
    scratch = Path(tempfile.mkdtemp(prefix="kgengine-brink-check-"))
    try:
        with open_store(str(scratch), create=True) as check_store:
            check_store.load("incomplete", _Published(incomplete, surface), dataset="brink")
            return run(check_store, "incomplete")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
