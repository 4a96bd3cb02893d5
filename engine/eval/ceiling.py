"""The MetaQA answerable ceiling: the share of questions whose gold answer lies within the
question's hop count of its topic entity in the KB (reads the KB, never given to an answerer)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kgengine.questions import QuestionRecord


def adjacency(triples: Iterable[tuple[str, str, str]]) -> dict[str, set[str]]:
    """Undirected entity adjacency (MetaQA questions walk relations both ways)."""
    out: dict[str, set[str]] = {}
    for h, _, t in triples:
        out.setdefault(h, set()).add(t)
        out.setdefault(t, set()).add(h)
    return out


def within_hops(graph: Mapping[str, set[str]], start: str, hops: int) -> set[str]:
    """Entities reachable from ``start`` in 1..hops steps."""
    seen, frontier, reached = {start}, {start}, set()
    for _ in range(hops):
        frontier = {n for e in frontier for n in graph.get(e, ())} - seen
        seen |= frontier
        reached |= frontier
    # undirected: the start is back after two steps (start -> n -> start)
    return reached | ({start} if hops >= 2 and graph.get(start) else set())


def answerable(questions: Sequence[QuestionRecord], graph: Mapping[str, set[str]]) -> list[bool]:
    """Per question: some gold answer is within its hop count of the topic entity in the KB."""
    cache: dict[tuple[str, int], set[str]] = {}
    out = []
    for q in questions:
        topic, hops = q.question.topic_entity, q.hops or 1
        if topic is None:
            out.append(False)
            continue
        key = (topic, hops)
        if key not in cache:
            cache[key] = within_hops(graph, topic, hops)
        out.append(any(a in cache[key] for a in q.answers))
    return out
