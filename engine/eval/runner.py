"""Answering a question set under each setting, resumably: every result is appended to
``results.jsonl`` (and flushed) as soon as it is produced, and a rerun with the same output
directory skips what is already there."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kgengine.errors import KGEngineError
from kgengine.eval.files import read_jsonl
from kgengine.eval.protocols import Setting
from kgengine.progress import progress_bar
from kgengine.questions import QuestionRecord
from kgengine.rag.base import Answer, Answerer, answer_or_error
from kgengine.rag.methods import AnswerSettings, build_answerer, settings_with, split_options
from kgengine.surface import Surface

AnswererFactory = Callable[[Setting], Answerer]
RESULTS = "results.jsonl"


def id_key(qid: Any) -> str:
    """A question id as a dict key that keeps its JSON type (1 and "1" differ)."""
    return json.dumps(qid, ensure_ascii=False)


def top_answer(answer: Answer) -> str | None:
    """What MetaQA Hit@1 compares: the best-ranked answer, else the whole raw output."""
    if answer.answers:
        return answer.answers[0].label or answer.answers[0].id
    return answer.raw_output or None


def result_record(setting: Setting, q: QuestionRecord, answer: Answer | None, error: str | None,
                  seconds: float, service_failed: bool = False) -> dict[str, Any]:
    return {
        "id": q.id,
        "setting": setting.key,
        "questions": setting.questions,
        "graph_setting": setting.setting,
        "graph": setting.graph,
        "method": setting.method,
        "hops": setting.hops,
        "top_k": setting.top_k,
        "train": None if setting.train is None else str(setting.train),
        "metric": setting.metric,
        "options": dict(setting.options),
        "question": q.question.text,
        "topic_entity": q.question.topic_entity,
        "raw_output": answer.raw_output if answer else "",
        "answers": [a.id for a in answer.answers] if answer else [],
        "answer_labels": [a.label for a in answer.answers] if answer else [],
        "top_answer": top_answer(answer) if answer else None,
        "linked_topic": answer.topic_entity if answer else None,
        "relation_path": answer.relation_path if answer else None,
        "learned_from": answer.learned_from if answer else None,
        "evidence_rules": sorted({e.rule for a in answer.answers for e in a.evidence if e.rule})
        if answer else [],
        "error": error,
        "service_failed": bool(error) and service_failed,
        "seconds": round(seconds, 4),
        "usage": answer.usage if answer else {},
        "gold": q.gold(),
    }


class ResultLog:
    """results.jsonl: the records of earlier (possibly interrupted) runs, appended to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[tuple[str, str], dict[str, Any]] = {}
        if path.is_file():
            for _, record in read_jsonl(path):
                self.records[(record["setting"], id_key(record["id"]))] = record
            self._repair_tail()

    def _repair_tail(self) -> None:
        """Drop a torn last line (the process was killed mid-write) before appending."""
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            self.path.write_bytes(data[: data.rfind(b"\n") + 1])

    def done(self, setting: Setting, question: QuestionRecord | Any) -> dict[str, Any] | None:
        """The earlier record of ``question`` (a record, or its id) under ``setting``, when it
        can stand: not a service's failure (a rerun retries those), the same graph, training file and set
        kind, and — given the record — the same text, topic and gold (an edited file redoes it)."""
        qid = question.id if isinstance(question, QuestionRecord) else question
        record = self.records.get((setting.key, id_key(qid)))
        train = None if setting.train is None else str(setting.train)
        if record is None or record.get("service_failed") or record.get("graph") != setting.graph \
                or record.get("train") != train or record.get("metric") != setting.metric:
            return None  # a failure, or another graph, training file or set kind under the name: redo
        if isinstance(question, QuestionRecord) and (
                record.get("question") != question.question.text
                or record.get("topic_entity") != question.question.topic_entity
                or record.get("gold") != question.gold()):
            return None  # the question file changed since
        return record

    def append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            fh.flush()
        self.records[(record["setting"], id_key(record["id"]))] = record


def run_plan(plan: Sequence[tuple[Setting, Sequence[QuestionRecord]]], factory: AnswererFactory,
             log: ResultLog, progress: bool = False, workers: int = 1) -> dict[str, list[dict[str, Any]]]:
    """Answer each setting's questions (skipping those already in ``log``); the records per
    setting key, in question order. An answerer error a user can cause (KGEngineError, e.g.
    an entity it cannot link) is recorded as a miss with its message; anything else stops.
    ``workers`` > 1 answers that many questions at once (for an LLM server that batches;
    every answerer keeps its state per call), the records still written in question order."""
    pending = [(s, [q for q in qs if log.done(s, q) is None]) for s, qs in plan]
    total = sum(len(qs) for _, qs in pending)
    with progress_bar("eval", total=total, enabled=progress) as bar:
        for setting, questions in pending:
            if not questions:
                continue
            bar.update(description=setting.key)
            answerer = factory(setting)

            def timed(q: QuestionRecord, answerer: Answerer = answerer) -> tuple[Answer, float]:
                started = time.perf_counter()
                return answer_or_error(answerer, q.question), time.perf_counter() - started

            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                for q, (answer, seconds) in zip(questions, pool.map(timed, questions), strict=True):
                    error = answer.error
                    log.append(result_record(setting, q, None if error else answer, error, seconds,
                                             answer.service_failed))
                    bar.advance()
    out: dict[str, list[dict[str, Any]]] = {}
    for setting, asked in plan:
        records = out.setdefault(setting.key, [])
        seen = {id_key(r["id"]) for r in records}
        for q in asked:
            if id_key(q.id) not in seen:
                record = log.records.get((setting.key, id_key(q.id)))
                assert record is not None  # answered above
                records.append(record)
                seen.add(id_key(q.id))
    return out


def answerer_parts(setting: Setting, extra: Mapping[str, Any]) -> tuple[AnswerSettings, Any]:
    """The shared settings and the method's own options for a setting: its hops, top-k,
    training file and swept options, plus ``extra`` (``--option KEY=VALUE``: a shared setting,
    or an option of this method; a key that only another swept method knows is left to it).
    Answers are written as the answered graph's own ids (``labels=dataset``), the form a BRINK
    build's KGs and questions share."""
    values: dict[str, Any] = {"labels": Surface.DATASET}
    if setting.hops is not None:
        values["hops"] = setting.hops
    if setting.top_k is not None:
        values["top_k"] = setting.top_k
    if setting.train is not None:
        values["train_paths"] = (setting.train,)
    shared, options = split_options(setting.method, {**extra, **dict(setting.options)}, strict=False)
    return settings_with(AnswerSettings(), {**values, **shared}), options


def check_extra(methods: Sequence[str], extra: Mapping[str, Any], sweeps: Sequence[str]) -> None:
    """Every ``--option``/``--sweep`` key is a shared setting or an option of some method run."""
    from kgengine.rag.methods import SHARED_KEYS, method_spec, option_keys

    known = set(SHARED_KEYS) | {k for m in methods for k in option_keys(method_spec(m).options)}
    unknown = [k for k in (*extra, *sweeps) if k not in known]
    if unknown:
        per_method = "; ".join(f"{m}: {', '.join(option_keys(method_spec(m).options)) or 'none'}"
                               for m in methods)
        raise KGEngineError(f"--option {', '.join(unknown)}: not an option of the methods run ({per_method}; "
                            f"shared: {', '.join(SHARED_KEYS)})")


def store_factory(store: Any, extra: Mapping[str, Any] | None = None,
                  log: Callable[[str], None] | None = None, resources: ExitStack | None = None
                  ) -> AnswererFactory:
    """Answerers from :func:`kgengine.rag.methods.build_answerer` on ``store``, one per
    setting (its one-line notes — rules mined, patterns learned — go to ``log``)."""

    def make(setting: Setting) -> Answerer:
        settings, options = answerer_parts(setting, extra or {})
        if log is None:
            return build_answerer(store, setting.graph, setting.method, settings, options,
                                  resources=resources)
        log(f"{setting.key}: building the {setting.method} answerer on graph {setting.graph!r}")
        return build_answerer(store, setting.graph, setting.method, settings, options,
                              log=lambda m: log(f"  {m}"), resources=resources)

    return make
