"""Scores of a run's records and the reports: summary.json (the same keys per setting),
summary.md, official gold/pred files per setting, misses.jsonl and PNG plots in the papers'
styles (BRINK Figs. 1-3, KG-RAG Figs. 5-6)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kgengine.eval.analysis import cause_counts, is_miss, miss_cause
from kgengine.eval.files import write_official
from kgengine.eval.metrics import (
    METRIC_KEYS,
    QuestionFigures,
    QuestionScore,
    aggregate,
    hard_hits_rate,
    hit_at_1,
    mean,
    mean_std,
    permissive_score_question,
    prediction_answers,
    read_gold,
    score_question,
)
from kgengine.questions import Metric

SUMMARY_KEYS = (*METRIC_KEYS, "hit@1")


# ---- scoring ----------------------------------------------------------------------------------
def official_gold(record: Mapping[str, Any]) -> dict[str, Any]:
    gold = record["gold"]
    return {"id": record["id"], "question": record["question"], "answers": gold["answers"],
            "hard_answer": "" if gold.get("hard_answer") is None else gold["hard_answer"]}


def uses_hit_at_1(record: Mapping[str, Any]) -> bool:
    """The record's question set declares Hit@1 (MetaQA) rather than BRINK's strict metrics."""
    return record["metric"] == Metric.HIT_AT_1


def question_scores(record: Mapping[str, Any], split_on_spaces: bool = False) -> QuestionFigures:
    """One record's strict scores (through the same parsing as the official files), its
    permissive ones and, for a Hit@1 set (MetaQA), Hit@1."""
    g = read_gold([official_gold(record)])[record["id"]]
    s = score_question(prediction_answers(record["raw_output"], split_on_spaces), g.answers, g.hard_answer)
    metaqa = uses_hit_at_1(record)
    loose = permissive_score_question(record["raw_output"], record["gold"]["answers"],
                                      official_gold(record)["hard_answer"], split_on_spaces)
    return {"hits_any": s.hits_any, "precision": s.precision, "recall": s.recall, "f1": s.f1,
            "hits_hard": None if metaqa else s.hits_hard,
            "hit@1": hit_at_1(record.get("top_answer"), record["gold"]["answers"]) if metaqa else None,
            "permissive_hits_any": loose.hits_any, "permissive_f1": loose.f1}


def summarise(records: Sequence[Mapping[str, Any]], scores: Sequence[QuestionFigures]
              ) -> dict[str, float | int | None]:
    """The setting's figures: strict BRINK metrics (official aggregation), Hit@1 for MetaQA."""
    metaqa = bool(records) and uses_hit_at_1(records[0])
    # every score but hits_hard (None for a Hit@1 set) and hit@1 (None for a BRINK set) is set
    strict = aggregate([QuestionScore(s["hits_any"], s["precision"], s["recall"], s["f1"],
                                      s["hits_hard"] or 0.0) for s in scores]).as_dict()
    out: dict[str, float | int | None] = dict(strict)
    if metaqa:
        out["hits_hard"] = out["hhr"] = None
        out["hit@1"] = mean([s["hit@1"] or 0.0 for s in scores])
    else:
        out["hit@1"] = None
    out["permissive_hits_any"] = mean([s["permissive_hits_any"] for s in scores])
    out["permissive_f1"] = mean([s["permissive_f1"] for s in scores])
    out["errors"] = sum(1 for r in records if r.get("error"))
    out["service_errors"] = sum(1 for r in records if r.get("service_failed"))
    return out


def by_rule_type(records: Sequence[Mapping[str, Any]], scores: Sequence[QuestionFigures]
                 ) -> dict[str, dict[str, float | int]]:
    groups: dict[str, list[QuestionFigures]] = defaultdict(list)
    for record, score in zip(records, scores, strict=True):
        kind = record["gold"].get("rule_type")
        if kind:
            groups[kind].append(score)
    out = {}
    for kind, items in sorted(groups.items()):
        hits_any = mean([s["hits_any"] for s in items])
        hits_hard = mean([s["hits_hard"] or 0.0 for s in items])
        out[kind] = {"hits_any": hits_any, "hits_hard": hits_hard, "hhr": hard_hits_rate(hits_hard, hits_any),
                     "f1": mean([s["f1"] for s in items]), "n": len(items)}
    return out


def setting_summary(records: Sequence[Mapping[str, Any]], samples: Mapping[int, Sequence[Any]] | None,
                    split_on_spaces: bool = False) -> dict[str, Any]:
    """Figures of one setting; with seeded samples the top-level figures are the means over
    seeds, ``std`` their population standard deviations and ``seeds`` the per-seed ones."""
    scores = [question_scores(r, split_on_spaces) for r in records]
    if not samples:
        out: dict[str, Any] = summarise(records, scores)
    else:
        index = {json.dumps(r["id"]): i for i, r in enumerate(records)}
        per_seed = {}
        for seed, ids in samples.items():
            chosen = [index[json.dumps(q)] for q in ids]
            per_seed[str(seed)] = summarise([records[i] for i in chosen], [scores[i] for i in chosen])
        out = {}
        out["std"] = {}
        for key in (*SUMMARY_KEYS, "permissive_hits_any", "permissive_f1", "errors", "service_errors"):
            values = [s[key] for s in per_seed.values()]
            present = [float(v) for v in values if v is not None]
            if len(present) < len(values):
                out[key] = None
                continue
            centre, spread = mean_std(present)
            out[key] = int(centre) if key == "n" else centre
            out["std"][key] = spread
        out["seeds"] = per_seed
    rule_types = by_rule_type(records, scores)
    if rule_types:
        out["by_rule_type"] = rule_types
    out["cost"] = question_cost(records)
    return out


def question_cost(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per question: wall time (p50 / p95 ms, every record of the setting) and, for the LLM
    methods, requests and tokens (means). ``cache_hits`` says how many replies came from the
    response cache: latencies with hits are not a model's (run with ``llm_cache=off``)."""
    millis = sorted(float(r.get("seconds") or 0.0) * 1000.0 for r in records)
    out: dict[str, Any] = {"p50_ms": percentile(millis, 50), "p95_ms": percentile(millis, 95)}
    usage = [r.get("usage") or {} for r in records]
    if any(usage):
        for key in ("requests", "prompt_tokens", "completion_tokens"):
            out[f"{key}_per_question"] = mean([float(u.get(key, 0)) for u in usage])
        out["cache_hits"] = sum(int(u.get("cache_hits", 0)) for u in usage)
    return out


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile of already sorted values (None for none)."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))
    return round(sorted_values[int(rank) - 1], 3)


# ---- misses -----------------------------------------------------------------------------------
class KB(Protocol):
    """What the miss analysis reads of an answered graph (never given to an answerer)."""

    def reachable(self, graph: str, topic: str, hops: int) -> set[str]: ...

    def has_triple(self, graph: str, head: str, relation: str, tail: str) -> bool: ...


def asked_fact(record: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(head, relation, tail) of a BRINK question's hard fact, from its gold pattern."""
    gold, topic = record["gold"], record.get("topic_entity")
    pattern, hard = gold.get("pattern"), gold.get("hard_answer")
    if not pattern or "/" not in pattern or hard is None or topic is None:
        return None
    relation, direction = pattern.rsplit("/", 1)
    if direction not in ("forward", "inverse"):
        return None
    return (topic, relation, str(hard)) if direction == "forward" else (str(hard), relation, topic)


def misses(records: Sequence[Mapping[str, Any]], kb: KB | None, brink_hops: int = 3,
           split_on_spaces: bool = False) -> list[dict[str, Any]]:
    out = []
    for record in records:
        scores = question_scores(record, split_on_spaces)
        if not is_miss(record, scores):
            continue
        metaqa = uses_hit_at_1(record)
        hops = (record["gold"].get("hops") or 1) if metaqa else brink_hops
        reachable = has_fact = None
        if kb is not None and record.get("topic_entity"):
            reachable = kb.reachable(record["graph"], record["topic_entity"], hops)
            fact = None if metaqa else asked_fact(record)
            has_fact = None if fact is None else kb.has_triple(record["graph"], *fact)
        cause = miss_cause(record, metaqa=metaqa, reachable=reachable, has_fact=has_fact)
        out.append({"setting": record["setting"], "id": record["id"], "question": record["question"],
                    "cause": cause, "raw_output": record["raw_output"], "error": record.get("error"),
                    "relation_path": record.get("relation_path"), "gold": record["gold"]["answers"][:10],
                    "hard_answer": record["gold"].get("hard_answer")})
    return out


# ---- files ------------------------------------------------------------------------------------
def slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", key).strip("_") or "setting"


def fmt(value: Any, std: Any = None) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}" + (f" ± {std:.3f}" if isinstance(std, float) else "")


def markdown(summary: Mapping[str, Any]) -> str:
    lines = [f"# kgengine eval: {', '.join(summary['question_sets'])}", ""]
    keys = ["hits_any", "precision", "recall", "f1", "hits_hard", "hhr", "hit@1", "n"]
    lines += ["| setting | " + " | ".join(keys) + " | ceiling | misses |",
              "|---|" + "---|" * (len(keys) + 2)]
    for key, s in summary["settings"].items():
        std = s.get("std", {})
        cells = [fmt(s.get(k), std.get(k)) for k in keys]
        ceiling = s.get("answerable_ceiling")
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {fmt(ceiling)} | {s.get('missed', 0)} |")
    lines += ["", "Strict BRINK metrics (official evaluator semantics); Hit@1 as in the KG-RAG paper "
              "§4.2.1 (MetaQA). Permissive substring figures (BRINK App. I, *not* strict):", ""]
    lines += ["| setting | permissive hits_any | permissive f1 |", "|---|---|---|"]
    for key, s in summary["settings"].items():
        lines.append(f"| {key} | {fmt(s.get('permissive_hits_any'))} | {fmt(s.get('permissive_f1'))} |")
    rule_rows = [(key, kind, v) for key, s in summary["settings"].items()
                 for kind, v in s.get("by_rule_type", {}).items()]
    if rule_rows:
        lines += ["", "By rule type:", "", "| setting | rule type | hits_any | hits_hard | hhr | n |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {k} | {kind} | {fmt(v['hits_any'])} | {fmt(v['hits_hard'])} | {fmt(v['hhr'])} "
                  f"| {v['n']} |" for k, kind, v in rule_rows]
    lines += ["", "Cost per question (wall time of every answer; LLM requests and tokens; replies from the "
              "response cache make a latency no model's):", "",
              "| setting | p50 ms | p95 ms | requests | prompt tokens | completion tokens | cache hits |",
              "|---|---|---|---|---|---|---|"]
    for key, s in summary["settings"].items():
        cost = s.get("cost", {})
        cells = [fmt(cost.get(k)) for k in ("p50_ms", "p95_ms", "requests_per_question",
                                            "prompt_tokens_per_question", "completion_tokens_per_question",
                                            "cache_hits")]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    causes = summary.get("miss_causes", {})
    if any(causes.values()):
        lines += ["", "Miss analysis (cause of each missed question):", "", "| setting | cause | questions |",
                  "|---|---|---|"]
        lines += [f"| {k} | {c} | {n} |" for k, counts in causes.items() for c, n in counts.items()]
    return "\n".join(lines) + "\n"


def write_reports(out_dir: Path, by_setting: Mapping[str, Sequence[Mapping[str, Any]]],
                  samples: Mapping[str, Mapping[int, Sequence[Any]]], meta: Mapping[str, Any],
                  kb: KB | None = None, ceilings: Mapping[str, float] | None = None,
                  split_on_spaces: bool = False, plots: bool = True) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    all_misses: list[dict[str, Any]] = []
    causes: dict[str, dict[str, int]] = {}
    for key, records in by_setting.items():
        s = setting_summary(records, samples.get(key), split_on_spaces)
        folder = out_dir / "official" / slug(key)
        folder.mkdir(parents=True, exist_ok=True)
        gold_path, pred_path = write_official(folder, [{**r, "gold": official_gold(r)} for r in records])
        s["official"] = {"gold": str(gold_path.relative_to(out_dir)),
                         "pred": str(pred_path.relative_to(out_dir))}
        first = records[0] if records else {}
        s["setting"] = {k: first.get(k) for k in ("questions", "graph_setting", "graph", "method", "hops",
                                                   "top_k", "train")}
        if ceilings and key in ceilings:
            s["answerable_ceiling"] = ceilings[key]
        missed = misses(records, kb, split_on_spaces=split_on_spaces)
        s["missed"] = len(missed)
        causes[key] = cause_counts(m["cause"] for m in missed)
        all_misses += missed
        settings[key] = s
    summary = {**meta, "settings": settings, "miss_causes": causes}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    (out_dir / "summary.md").write_text(markdown(summary), encoding="utf-8")
    with (out_dir / "misses.jsonl").open("w", encoding="utf-8") as fh:
        for m in all_misses:
            fh.write(json.dumps(m, ensure_ascii=False) + "\n")
    if plots:
        from kgengine.eval.plots import write_plots

        summary["plots"] = [str(p.relative_to(out_dir)) for p in write_plots(out_dir, summary)]
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                                              encoding="utf-8")
    return summary
