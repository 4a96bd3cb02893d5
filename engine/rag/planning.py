"""Planning: the LLM's job is small (in the spirit of RoG's planning step, beyond the
KG-RAG papers). The graph offers the relation paths around the topic entity; the LLM picks
one from a short numbered list (``plan_relation_path``); the graph answers along it, with the
mined rules' alternative paths as the offline answerer has them (direct answers, rule-guided
candidates, the learned or default cut).

The list: the offline relation linker's proposal (learned from a training split, the nearest
learned pattern, or zero-shot) and its alternatives first, then the other paths the graph has
from the topic (up to ``hops`` long), ranked by how well their relation words match the
question's; at most ``max_choices``. A reply that names no listed number falls back to the
offline proposal, said in the reasoning. A 135M model answers this multiple choice far more
reliably than it writes the answer entities themselves."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgengine.errors import KGEngineError
from kgengine.llm import LLM, LLMRequest, Prompt, load_prompt
from kgengine.model import Question
from kgengine.rag.base import Answer, BaseAnswerer, LinkedEntity, Timings
from kgengine.rag.graph.steps import RelationPath, format_path
from kgengine.rag.graph.view import GraphView
from kgengine.rag.linking.patterns import pattern_of
from kgengine.rag.linking.words import lexical_relation_score, question_words, relation_words
from kgengine.rag.methods import MethodContext, MethodSpec, Need
from kgengine.rag.offline import OfflineAnswerer, OfflineOptions, build_offline_answerer
from kgengine.rag.verbalise import relation_text

PLAN_MAX_TOKENS = 8
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class PlanOptions(OfflineOptions):
    max_choices: int = 8  # relation paths the LLM chooses from

    def check(self) -> None:
        super().check()
        if self.max_choices < 2:
            raise KGEngineError(f"--option max_choices must be at least 2, got {self.max_choices}")


class PlanningAnswerer(BaseAnswerer):
    def __init__(self, method: str, offline: OfflineAnswerer, view: GraphView, llm: LLM, *,
                 hops: int, max_choices: int, relation_labels: dict[str, str] | None = None,
                 prompt: Prompt | None = None) -> None:
        self.method, self.offline, self.view, self.llm = method, offline, view, llm
        self.entity_linker = offline.entity_linker
        self.hops, self.max_choices = hops, max_choices
        self.relation_labels = relation_labels or {}
        self.prompt = prompt or load_prompt("plan_relation_path")

    def describe(self, path: RelationPath) -> str:
        steps = []
        for step in path:
            words = self.relation_labels.get(step.relation) or relation_text(step.relation)
            steps.append(f"{words} (reverse)" if step.inverse else words)
        return " → ".join(steps)

    def choices(self, text: str, topic: str, proposal: list[RelationPath]) -> list[RelationPath]:
        """The proposal's paths the graph has, then the graph's other paths by word match."""
        offered = self.view.paths_from(topic, list(range(1, self.hops + 1)))
        words = question_words(pattern_of(text, None))

        def match(path: RelationPath) -> float:
            return sum(lexical_relation_score(words, relation_words(s.relation, self.relation_labels.get(
                s.relation))) for s in path) / len(path)

        first = [p for p in dict.fromkeys(proposal) if p in offered]
        rest = sorted((p for p in offered if p not in first),
                      key=lambda p: (-match(p), len(p), format_path(p)))
        return (first + rest)[: self.max_choices]

    def get_answer(self, question: Question, topic: LinkedEntity | None, timings: Timings) -> Answer:
        assert topic is not None
        timings.ms.setdefault("llm_ms", 0.0)
        with timings.step("link_relation_ms"):
            linked = self.offline.relation_linker.link(question.text, topic.id, topic.mention)
        reasoning = [f"topic entity {topic.id} ({topic.how})", f"offline proposal: {linked.describe()}"]
        with timings.step("choices_ms"):
            choices = self.choices(question.text, topic.id,
                                   [linked.path, *(path for path, _ in linked.alternatives)])
        if not choices:
            reasoning.append("the graph has no relation path from the topic entity")
            return self.offline.result(question, topic.id, linked.path, linked.learned_from, {}, reasoning)
        listed = "\n".join(f"{i}. {self.describe(p)}" for i, p in enumerate(choices, 1))
        prompt = self.prompt.fill(question=question.text, entity=self.offline.surface(topic.id), paths=listed)
        with timings.step("llm_ms"):
            reply = self.llm.complete(LLMRequest.of(prompt, temperature=0.0, max_tokens=PLAN_MAX_TOKENS))
        number = next((int(n) for n in _NUMBER.findall(reply) if 1 <= int(n) <= len(choices)), None)
        if number is None:
            path = linked.path if linked.path in choices else choices[0]
            reasoning.append(f"the LLM's reply {reply.strip()[:60]!r} names none of the {len(choices)} "
                             "paths; "
                             f"following {' / '.join(format_path(path))}")
        else:
            path = choices[number - 1]
            reasoning.append(f"the LLM chose {number} of {len(choices)}: {' / '.join(format_path(path))}")
        candidates = self.offline.candidates(topic.id, path, reasoning, timings.ms)
        return self.offline.result(question, topic.id, path, "llm-plan" if number else linked.learned_from,
                                   candidates, reasoning)


def build_planning(context: MethodContext, options: PlanOptions) -> PlanningAnswerer:
    llm = context.llm()  # first: the endpoint is checked before rules are mined
    offline = build_offline_answerer(context, options, rule_guided=False)
    # every path around the topic, for each question: the graph in memory
    return PlanningAnswerer(context.method, offline, context.memory_view(), llm, hops=context.settings.hops,
                            max_choices=options.max_choices,
                            relation_labels=context.store.relation_labels(context.graph))


PLAN = MethodSpec("the LLM picks the relation path from those the graph offers around the topic, the graph "
                  "answers along it with the rules' alternatives", build_planning, PlanOptions,
                  frozenset({Need.LLM, Need.RULES, Need.TRAINING}))
