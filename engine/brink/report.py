"""BRINK statistics: Table 1 (rules by type) and Table 3 (triples and questions per split)
as JSON and Markdown (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kgengine.brink.questions import SPLITS, QuestionItem
from kgengine.mining.rules import Rule, RuleType

# BRINK's published figures (Tables 1 and 3) for the sanity-band comparison
OFFICIAL: dict[str, dict[str, Any]] = {
    "family": {
        "rules": {"total": 145, "symmetry": 0, "inversion": 6, "hierarchy": 0,
                  "composition": 56, "other": 83},
        "triples": {"complete": 17615, "incomplete": 15785},
        "questions": {"total": 2165, "train": 1749, "valid": 218, "test": 198},
    },
    "fb15k-237": {
        "rules": {"total": 1066},
        "questions": {"total": 5449, "train": 4374, "valid": 535, "test": 540},
    },
}


def rule_type_counts(rules: Sequence[Rule]) -> dict[str, int]:
    counts = Counter(r.rule_type for r in rules)
    out = {t.value: counts.get(t, 0) for t in RuleType}
    out["total"] = len(rules)
    return out


def question_counts(splits: Mapping[str, Sequence[QuestionItem]], rules: Sequence[Rule]) -> dict[str, Any]:
    """Per split, plus the whole set by rule type (of the primary path) and direction."""
    every = [item for name in SPLITS for item in splits[name]]
    by_type = Counter(rules[item.paths[0].rule].rule_type.value for item in every)
    return {
        "total": len(every),
        **{name: len(splits[name]) for name in SPLITS},
        "by_rule_type": {t.value: by_type.get(t.value, 0) for t in RuleType},
        "by_direction": dict(sorted(Counter(item.direction.value for item in every).items())),
    }


def markdown(stats: Mapping[str, Any]) -> str:
    """stats.md: the paper's two tables for this build, then the construction funnel."""
    rules, triples, questions = stats["rules"], stats["triples"], stats["questions"]
    types = [t.value for t in RuleType]
    lines = [
        f"# BRINK statistics: {stats['graph']}",
        "",
        "## Mined rules (BRINK Table 1)",
        "",
        "| " + " | ".join(["total", *types]) + " |",
        "|" + "---:|" * (len(types) + 1),
        "| " + " | ".join(str(rules["by_type"][k]) for k in ["total", *types]) + " |",
        "",
        "## Triples and questions (BRINK Table 3)",
        "",
        "| complete KG | incomplete KG | train | valid | test | total |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {triples['complete']:,} | {triples['incomplete']:,} | {questions['train']:,} "
        f"| {questions['valid']:,} | {questions['test']:,} | {questions['total']:,} |",
        "",
        "## Construction",
        "",
        "| step | count |",
        "|---|---:|",
    ]
    g = stats["groundings"]
    funnel = [
        ("rules with groundings", rules["with_groundings"]),
        ("groundings selected", g["selected"]),
        ("… dropped: head is another selected grounding's body triple", g["conflicts"]),
        ("groundings kept (heads removed)", g["kept"]),
        ("removed triples", triples["removed"]),
        ("question items", questions["items"]),
        ("… dropped: the question would name the answer", questions["unaskable"]),
        ("… dropped by balancing (τ)", questions["balanced_away"]),
        ("questions", questions["total"]),
    ]
    if rules.get("drawn", rules["by_type"]["total"]) < rules["by_type"]["total"]:
        funnel.insert(0, (f"rules drawn until {rules['with_groundings']:,} had groundings (--max-rules)",
                          rules["drawn"]))
    if g.get("capped_rules"):
        funnel.insert(1, ("… rules sampled from their first --max-candidates groundings",
                          g["capped_rules"]))
    lines += [f"| {name} | {value:,} |" for name, value in funnel]
    qt = questions["by_rule_type"]
    lines += [
        "",
        "Questions by rule type: " + ", ".join(f"{k} {v:,}" for k, v in qt.items()) + ".",
        f"Answers per question: {questions['answers_mean']:.2f} on average "
        f"({questions['multi_answer']:,} questions have more than one).",
    ]
    a = stats.get("answerability")
    if a:
        lines.append(f"Answerability (App. H, symbolic): {a['rederived']:,} of {a['checked']:,} kept "
                     f"groundings have their removed triple re-derived from the incomplete KG by "
                     f"their rule ({a['fraction']:.1%}; {triples['removed']:,} removed triples).")
    if stats.get("llm"):
        llm = stats["llm"]
        lines.append("LLM: " + ", ".join(f"{k} {v:,}" for k, v in llm.items()) + ".")
    return "\n".join(lines) + "\n"
