"""BuildEntity surface forms of a BRINK build (``entities.tsv``: private id, dataset id, label):
re-expressing its questions, answers and KGs in another form (private ids, as BRINK §5.4's
default; dataset ids; text labels), and the labels the official splitting cannot match —
those containing a comma (split apart) and those equal after normalisation (counted as one)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kgengine.errors import InputError, KGEngineError
from kgengine.eval.metrics import normalize_answer
from kgengine.questions import QuestionRecord, QuestionSet
from kgengine.surface import Surface, parse_surface


@dataclass(frozen=True)
class BuildEntity:
    private: str
    dataset: str
    label: str  # "" when the entity has none

    def form(self, name: str) -> str:
        if name == Surface.PRIVATE:
            return self.private
        if name == Surface.TEXT:
            return self.label or self.dataset  # as a text-label build: the id where no label
        return self.dataset


def read_entities(path: Path) -> list[BuildEntity]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if number == 1 and line.startswith("private_id\t"):
                continue
            fields = line.split("\t")
            if len(fields) != 3:
                raise InputError(str(path), number, line, "expected private_id<TAB>dataset_id<TAB>label")
            out.append(BuildEntity(*fields))
    return out


def surface_map(entities: list[BuildEntity], source: str, target: str) -> dict[str, str]:
    """BuildEntity surface in ``source`` form -> its ``target`` form."""
    return {e.form(source): e.form(target) for e in entities}


def ambiguous_labels(surfaces: list[str]) -> dict[str, Any]:
    """Surfaces the official evaluator cannot match one to one: with a comma or a newline
    (split into pieces) and groups equal after normalisation."""
    with_comma = sorted(s for s in surfaces if re.search(r"[,\n\r]", s))
    groups: dict[str, list[str]] = defaultdict(list)
    for s in surfaces:
        groups[normalize_answer(s)].append(s)
    collisions = {k: sorted(v) for k, v in groups.items() if len(v) > 1}
    return {"with_comma": len(with_comma), "with_comma_examples": with_comma[:10],
            "colliding_groups": len(collisions),
            "colliding_entities": sum(len(v) for v in collisions.values()),
            "colliding_examples": dict(list(sorted(collisions.items()))[:10])}


def _replace_topic(text: str, old: str, new: str) -> str:
    pattern = re.compile(rf"(?<![\w]){re.escape(old)}(?![\w])")
    return pattern.sub(lambda _: new, text, count=1)


def reexpress(q: QuestionRecord, mapping: Mapping[str, str]) -> QuestionRecord:
    topic = q.question.topic_entity
    new_topic = mapping.get(topic, topic) if topic is not None else None
    text = q.question.text if topic is None else _replace_topic(q.question.text, topic, new_topic or topic)
    return replace(q, question=replace(q.question, text=text, topic_entity=new_topic),
                   answers=tuple(mapping.get(a, a) for a in q.answers),
                   hard_answer=None if q.hard_answer is None else mapping.get(q.hard_answer, q.hard_answer))


def build_form(build_dir: Path) -> str:
    stats = build_dir / "stats.json"
    if not stats.is_file():
        return Surface.PRIVATE
    labels = json.loads(stats.read_text(encoding="utf-8")).get("settings", {}).get("labels", "private")
    return parse_surface(labels)


def reexpress_set(qset: QuestionSet, target: str, log: Any = None) -> QuestionSet:
    """The build's questions (and, through ``meta['surface']``, its KGs) in ``target`` form."""
    target = parse_surface(target)
    if qset.build_dir is None or not (qset.build_dir / "entities.tsv").is_file():
        raise KGEngineError(f"--labels needs a BRINK build directory with entities.tsv "
                            f"({qset.name} has none)")
    entities = read_entities(qset.build_dir / "entities.tsv")
    source = build_form(qset.build_dir)
    warnings = ambiguous_labels([e.form(target) for e in entities])
    if log is not None and (warnings["with_comma"] or warnings["colliding_groups"]):
        log(f"{target} surface forms: {warnings['with_comma']} contain a comma (the official splitting "
            f"breaks them), {warnings['colliding_entities']} entities share a normalised form with "
            f"another ({warnings['colliding_groups']} groups)")
    if source == target:
        return replace(qset, meta={**qset.meta, "surface": target, "surface_warnings": warnings})
    mapping = surface_map(entities, source, target)
    return replace(qset, name=f"{qset.name}[{target}]",
                   questions=tuple(reexpress(q, mapping) for q in qset.questions),
                   meta={**qset.meta, "surface": target, "surface_from": source,
                         "surface_warnings": warnings},
                   surface=mapping)


def reexpress_jsonl(source: Path, target: Path, mapping: Mapping[str, str]) -> Path:
    """A BRINK-schema JSONL (a build's train split) with its entities re-expressed."""
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        topic = record.get("topic_entity")
        if topic is not None:
            record["question"] = _replace_topic(record["question"], topic, mapping.get(topic, topic))
            record["topic_entity"] = mapping.get(topic, topic)
        record["answers"] = [mapping.get(a, a) for a in record.get("answers", [])]
        if record.get("hard_answer") is not None:
            record["hard_answer"] = mapping.get(record["hard_answer"], record["hard_answer"])
        for key in ("removed_triple", "alternative_path", "paths", "rule", "relation"):
            record.pop(key, None)  # not re-expressed: dropped rather than left inconsistent
        lines.append(json.dumps(record, ensure_ascii=False))
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return target
