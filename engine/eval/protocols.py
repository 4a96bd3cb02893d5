"""The papers' evaluation protocols as pure functions: seeded samples (KG-RAG: 500 questions
per seed 0-7, mean ± std), parameter sweeps (hops × top-k), settings (complete vs incomplete
graphs) and the held-out-patterns split for MetaQA."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kgengine.errors import KGEngineError

T = TypeVar("T")


def parse_int_list(text: str | None, option: str) -> list[int | None]:
    """``"1,2,3"`` or ``"0-7"`` (inclusive) or a mix; None/"" -> [None] (use the default)."""
    if not text:
        return [None]
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:  # an inclusive range of non-negative integers
                first, last = part.split("-", 1)
                low, high = int(first), int(last)
                if high < low or low < 0:
                    raise ValueError
                out.extend(range(low, high + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise KGEngineError(f"{option} {text!r}: expected integers like 1,2,3 or a range like 0-7"
                                ) from None
    return list(dict.fromkeys(out))


def sample(items: Sequence[T], n: int | None, seed: int | None) -> list[T]:
    """A seeded sample of ``n`` items in their original order (all items when n is None or
    at least their number)."""
    if n is None or n >= len(items):
        return list(items)
    if n < 1:
        raise KGEngineError(f"--sample {n}: must be at least 1")
    chosen = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in chosen]


@dataclass(frozen=True)
class GraphSetting:
    name: str  # "complete", "incomplete", or the graph's own name
    graph: str


def parse_graph_settings(values: Iterable[str]) -> list[GraphSetting]:
    """``--graph complete=G1 --graph incomplete=G2`` or ``--graph G``."""
    out: list[GraphSetting] = []
    for value in values:
        name, sep, graph = value.partition("=")
        if not sep:
            name, graph = value, value
        if not name or not graph:
            raise KGEngineError(f"--graph {value!r}: expected NAME=GRAPH or GRAPH")
        if any(s.name == name for s in out):
            raise KGEngineError(f"--graph: setting {name!r} given twice")
        out.append(GraphSetting(name, graph))
    return out


@dataclass(frozen=True)
class Setting:
    """One configuration every question of a set is answered under."""

    questions: str  # question-set name
    setting: str  # graph setting name
    graph: str
    method: str
    hops: int | None = None
    top_k: int | None = None
    train: Path | None = None
    metric: str = ""  # what the question set declares (kgengine.questions.Metric)
    options: tuple[tuple[str, str], ...] = ()  # swept method options (KEY, VALUE)

    @property
    def key(self) -> str:
        parts = [self.questions, self.setting, self.method]
        if self.hops is not None:
            parts.append(f"hops={self.hops}")
        if self.top_k is not None:
            parts.append(f"k={self.top_k}")
        parts += [f"{key}={value}" for key, value in self.options]
        return "/".join(parts)


def parse_sweeps(values: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``--sweep beam_width=1,2,3`` -> [("beam_width", ["1", "2", "3"])]."""
    out: list[tuple[str, list[str]]] = []
    for value in values:
        key, sep, text = value.partition("=")
        items = [v.strip() for v in text.split(",") if v.strip()]
        if not sep or not key.strip() or not items:
            raise KGEngineError(f"--sweep {value!r}: expected KEY=V1,V2,...")
        if any(k == key.strip() for k, _ in out):
            raise KGEngineError(f"--sweep: {key.strip()} given twice")
        out.append((key.strip(), list(dict.fromkeys(items))))
    return out


def expand(question_sets: Sequence[str], graphs: Sequence[GraphSetting], methods: Sequence[str],
           hops: Sequence[int | None], top_k: Sequence[int | None],
           train: dict[str, Path | None], metric: dict[str, str] | None = None,
           sweeps: Sequence[tuple[str, Sequence[str]]] = ()) -> list[Setting]:
    """Every combination, in a stable order (question set, graph, method, hops, k, swept
    options in the order given)."""
    combos: list[tuple[tuple[str, str], ...]] = [()]
    for key, values in sweeps:
        combos = [(*c, (key, v)) for c in combos for v in values]
    metric = metric or {}
    return [Setting(q, g.name, g.graph, m, h, k, train.get(q), metric.get(q, ""), c)
            for q in question_sets for g in graphs for m in methods for h in hops for k in top_k
            for c in combos]


def heldout_patterns(patterns: Iterable[str], share: float, seed: int) -> set[str]:
    """A seeded ``share`` of the distinct patterns (at least one, never all of them)."""
    distinct = sorted(set(patterns))
    if not 0 < share < 1:
        raise KGEngineError(f"--heldout-share {share}: must be between 0 and 1 (exclusive)")
    if len(distinct) < 2:
        raise KGEngineError("held-out patterns need at least two question patterns (qtype files)")
    count = min(len(distinct) - 1, max(1, round(share * len(distinct))))
    return set(random.Random(f"heldout/{seed}").sample(distinct, count))
