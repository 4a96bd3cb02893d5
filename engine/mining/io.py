"""Mined rules in and out: AMIE 3's TSV (what ``kgengine mine -o`` writes, and AMIE's own
stdout), the reference-style ``body``/``head`` TSV, and JSON.

``read_rules(path)`` is what BRINK and rule-guided retrieval call to read rules back."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgengine.errors import KGEngineError
from kgengine.mining.measures import Measures, amie_number
from kgengine.mining.rules import Atom, Rule, RuleType, parse_rule

# AMIE 3's output header (Rule.printRuleBasicHeaders), the columns of ``kgengine mine -o``
AMIE_COLUMNS = ("Rule", "Head Coverage", "Std Confidence", "PCA Confidence", "Positive Examples",
                "Body size", "PCA Body size", "Functional variable")
_MEASURE_KEYS = ("head_coverage", "std_confidence", "pca_confidence", "support", "body_size",
                 "pca_body_size", "functional_variable")
# the reference TSV (../shared/reference/amie3/*.tsv) and other snake_case headers
_ALIASES = {
    "hc": "head_coverage", "head coverage": "head_coverage",
    "std_conf": "std_confidence", "std confidence": "std_confidence",
    "pca_conf": "pca_confidence", "pca confidence": "pca_confidence",
    "positive examples": "support", "body size": "body_size", "pca body size": "pca_body_size",
    "functional variable": "functional_variable",
}


@dataclass(frozen=True)
class MinedRule:
    """A rule with its AMIE measures. ``rule`` is canonical (head variables ?a, ?b as in AMIE);
    ``amie`` is the rule in AMIE's notation and variable names, as written to the TSV."""

    rule: Rule
    support: int
    head_coverage: float
    std_confidence: float
    pca_confidence: float
    body_size: int
    pca_body_size: int
    functional_variable: str  # "?a" (head subject) or "?b" (head object)
    amie: str = ""

    @property
    def rule_type(self) -> RuleType:
        return self.rule.rule_type

    @property
    def head_relation(self) -> str:
        return self.rule.head.relation

    @classmethod
    def from_measures(cls, rule: Rule, measures: Measures, amie: str = "") -> MinedRule:
        head_var = rule.head.subject if measures.functional_side == "subject" else rule.head.object
        return cls(rule, measures.support, measures.head_coverage, measures.std_confidence,
                   measures.pca_confidence, measures.body_size, measures.pca_body_size, head_var,
                   amie or amie_text(rule.body, rule.head))

    def tsv_row(self) -> list[str]:
        return [self.amie or amie_text(self.rule.body, self.rule.head),
                amie_number(self.head_coverage), amie_number(self.std_confidence),
                amie_number(self.pca_confidence), str(self.support), str(self.body_size),
                str(self.pca_body_size), self.functional_variable]

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": str(self.rule),
            "amie": self.amie or amie_text(self.rule.body, self.rule.head),
            "head": str(self.rule.head),
            "body": [str(a) for a in self.rule.body],
            "rule_type": str(self.rule_type),
            "support": self.support,
            "head_coverage": self.head_coverage,
            "std_confidence": self.std_confidence,
            "pca_confidence": self.pca_confidence,
            "body_size": self.body_size,
            "pca_body_size": self.pca_body_size,
            "functional_variable": self.functional_variable,
        }


def amie_text(body: Iterable[Atom], head: Atom) -> str:
    """AMIE's ``Rule.getRuleString``: body atoms sorted by relation, then object, then
    subject (string order), each ``subject  relation  object`` followed by two spaces."""
    ordered = sorted(body, key=lambda a: (a.relation, a.object, a.subject))
    text = "".join(f"{a.subject}  {a.relation}  {a.object}  " for a in ordered)
    return f"{text} => {head.subject}  {head.relation}  {head.object}"


# ---- writing ---------------------------------------------------------------------------------
def write_tsv(rules: Iterable[MinedRule], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write("\t".join(AMIE_COLUMNS) + "\n")
        for rule in rules:
            fh.write("\t".join(rule.tsv_row()) + "\n")


def write_json(rules: Iterable[MinedRule], path: Path, meta: dict[str, Any] | None = None) -> None:
    payload = {"meta": meta or {}, "rules": [r.to_json() for r in rules]}
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


# ---- reading ---------------------------------------------------------------------------------
def read_rules(path: Path | str) -> list[MinedRule]:
    """Rules from an AMIE 3 stdout capture, an AMIE-style TSV (ours), a ``body``/``head`` TSV
    or our JSON, in file order; rules equal up to variable renaming are kept once.

    Raises :class:`KGEngineError` naming the file and line of anything unparsable."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise KGEngineError(f"cannot read rules file {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise KGEngineError(f"rules file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})"
                            ) from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        rules = _read_json(text, str(path))
    else:
        rules = parse_rules_text(text, str(path))
    unique: dict[Rule, MinedRule] = {}
    for rule in rules:
        unique.setdefault(rule.rule, rule)
    if not unique:
        raise KGEngineError(f"{path}: no rules found")
    return list(unique.values())


def parse_rules_text(text: str, source: str = "<rules>") -> list[MinedRule]:
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    header = [h.strip().lower() for h in first.split("\t")]
    if "body" in header and "head" in header:
        return _read_table(text, source)
    # AMIE's stdout and our TSV: rule lines contain '=>', log and header lines do not
    out = []
    for number, raw in enumerate(lines, start=1):
        if "=>" not in raw:
            continue
        fields = raw.rstrip("\r\n").split("\t")
        values = dict(zip(_MEASURE_KEYS, (f.strip() for f in fields[1:]), strict=False))
        out.append(_record(fields[0], values, source, number))
    return out


def _read_table(text: str, source: str) -> list[MinedRule]:
    out = []
    reader = csv.DictReader(io.StringIO(text), delimiter="\t")
    for number, row in enumerate(reader, start=2):
        values = {_ALIASES.get(k.strip().lower(), k.strip().lower()): (v or "").strip()
                  for k, v in row.items() if k is not None}
        body, head = values.pop("body", ""), values.pop("head", "")
        if not head:
            continue
        out.append(_record(f"{body} => {head}", values, source, number))
    return out


def _read_json(text: str, source: str) -> list[MinedRule]:
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KGEngineError(f"{source}: invalid JSON: {exc}") from exc
    items = payload.get("rules", []) if isinstance(payload, dict) else payload
    out = []
    for number, item in enumerate(items, start=1):
        values = {k: str(item.get(k, "")) for k in _MEASURE_KEYS}
        out.append(_record(item.get("amie") or item.get("rule", ""), values, source, number))
    return out


def _record(rule_text: str, values: dict[str, str], source: str, line: int) -> MinedRule:
    try:
        rule = parse_rule(rule_text)
        amie = rule_text.strip() if "(" not in rule_text else ""
        return MinedRule(
            rule=rule,
            support=int(float(values.get("support") or 0)),
            head_coverage=float(values.get("head_coverage") or 0),
            std_confidence=float(values.get("std_confidence") or 0),
            pca_confidence=float(values.get("pca_confidence") or 0),
            body_size=int(float(values.get("body_size") or 0)),
            pca_body_size=int(float(values.get("pca_body_size") or 0)),
            functional_variable=_functional(rule_text, rule, values.get("functional_variable", "")),
            amie=amie,
        )
    except ValueError as exc:
        raise KGEngineError(f"{source}:{line}: {exc}") from exc


def _functional(rule_text: str, rule: Rule, written: str) -> str:
    """The functional variable in the canonical rule's names (?a = head subject, ?b = head
    object); files name it with their own variables, so map through the written head."""
    if not written:
        return ""
    head_text = rule_text.split("=>", 1)[1].strip()
    if "(" in head_text:
        args = head_text[head_text.index("(") + 1 : head_text.rindex(")")].split(",")
        subject, obj = (a.strip() for a in args)
    else:
        subject, _, obj = head_text.split()
    if written == subject:
        return rule.head.subject
    if written == obj:
        return rule.head.object
    raise ValueError(f"functional variable {written!r} is not a head variable")
