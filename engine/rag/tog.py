"""Think-on-Graph (Sun et al., ICLR 2024): the LLM walks the graph from the topic entity in
a beam search — one of the KG-RAG methods the BRINK paper evaluates.

Per depth, for each path in the beam (at most ``beam_width``):

1. *relation exploration*: the relations around the path's last entity, both directions
   (named queries ``entity_relations_out`` / ``entity_relations_in``); *relation pruning*:
   the LLM picks and scores up to ``beam_width``
   of them (``tog_relation_prune``);
2. *entity exploration*: the entities each kept relation leads to (``answer_step_out`` /
   ``answer_step_in``, at most ``max_entities`` per relation, in id order, never an entity
   the path has visited); *entity
   pruning*: the LLM scores them (``tog_entity_prune``); a path's score is the relation's
   score times the entity's; the ``beam_width`` best extended paths are the next beam;
3. *reasoning*: the LLM is shown every triple the kept paths hold and says whether they
   suffice (``tog_reasoning``); if so, or at ``depth``, it answers from them (``tog_answer``).

A reply that names nothing the prompt offered falls back to the candidates in their order
(most facts first for relations), said in the reasoning; replies are mapped back to graph
entities as the other LLM methods do. Graph access is through named queries only, so it
runs on every backend."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kgengine.errors import KGEngineError
from kgengine.llm import LLM, LLMRequest, Prompt
from kgengine.llm.prompt import shipped
from kgengine.model import Question, Triple
from kgengine.rag.base import Answer, BaseAnswerer, EntityLinker, LinkedEntity, Timings
from kgengine.rag.graph.steps import Step
from kgengine.rag.graph.view import GraphView, question_started
from kgengine.rag.llm_methods import ANSWER_MAX_TOKENS, SurfaceIndex, map_answers, parse_answer_text
from kgengine.rag.methods import MethodContext, MethodSpec, Need
from kgengine.rag.verbalise import SurfaceForms, verbalise

PRUNE_MAX_TOKENS = 256
REASONING_MAX_TOKENS = 128
_SCORE = re.compile(r"\(?\s*score\s*:?\s*([01](?:\.\d+)?|\.\d+)\s*\)?", re.IGNORECASE)
_NUMBERING = re.compile(r"^\s*(?:\d+\s*[.):]|[-*•])\s*")


@dataclass(frozen=True)
class ToGOptions:
    """Think-on-Graph's own settings (the paper's defaults: width 3, depth 3)."""

    beam_width: int = 3  # paths kept per depth, relations kept per entity
    depth: int = 3  # most exploration rounds before answering from what was found
    max_relations: int = 40  # candidate relations shown per entity (most facts first)
    max_entities: int = 20  # candidate entities per kept relation (in id order)
    entity_pruning: bool = True  # False: keep the first candidates without asking (ToG-R style)

    def check(self) -> None:
        for name in ("beam_width", "depth", "max_relations", "max_entities"):
            if getattr(self, name) < 1:
                raise KGEngineError(f"--option {name} must be at least 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ToGPrompts:
    relation_prune: Prompt = shipped("tog_relation_prune")
    entity_prune: Prompt = shipped("tog_entity_prune")
    reasoning: Prompt = shipped("tog_reasoning")
    answer: Prompt = shipped("tog_answer")


@dataclass(frozen=True)
class Path:
    """A walked path: its triples (graph direction) and the entity it ends at."""

    triples: tuple[Triple, ...]
    end: str
    score: float = 1.0
    relations: tuple[str, ...] = ()  # the relation path, ^ = walked backwards


def parse_scored(reply: str, offered: Sequence[str], limit: int) -> list[tuple[str, float]]:
    """The offered items a pruning reply names, in its order, with their scores (a missing
    score counts as an equal share); each item at most once; at most ``limit``. An item is
    named when a reply line, numbering and score removed, equals it (case-insensitively) or
    starts with it."""
    by_text = {o.casefold(): o for o in offered}
    picked: dict[str, float | None] = {}
    for line in reply.splitlines():
        score_match = _SCORE.search(line)
        text = _NUMBERING.sub("", line[: score_match.start()] if score_match else line).strip(" :.-\t\"'")
        key = text.casefold()
        found = by_text.get(key) or next((by_text[k] for k in sorted(by_text, key=len, reverse=True)
                                          if key.startswith(k) and k), None)
        if found is None or found in picked:
            continue
        picked[found] = float(score_match.group(1)) if score_match else None
        if len(picked) >= limit:
            break
    if not picked:
        return []
    share = 1.0 / len(picked)
    return [(item, share if score is None else score) for item, score in picked.items()]


def says_yes(reply: str) -> bool:
    """The reasoning check's verdict: ``{Yes}`` (or a reply starting with yes)."""
    head = reply.strip().lstrip("{[(").casefold()
    return head.startswith("yes")


class ToGAnswerer(BaseAnswerer):
    def __init__(self, method: str, *, view: GraphView, llm: LLM, linker: EntityLinker | None,
                 surface: SurfaceForms, options: ToGOptions, prompts: ToGPrompts | None = None,
                 relation_labels: dict[str, str] | None = None) -> None:
        self.method, self.view, self.llm = method, view, llm
        self.entity_linker, self.surface, self.options = linker, surface, options
        self.prompts = prompts or ToGPrompts()
        self.index = SurfaceIndex(surface)
        self.relation_labels = relation_labels or {}

    # -- graph access (the graph view) --------------------------------------------------------
    def _relations(self, entity: str, timings: Timings) -> list[tuple[str, bool, int]]:
        """(relation, inverse, facts) around ``entity``, most facts first."""
        with timings.step("graph_ms"):
            steps = self.view.steps([entity])
        found = [(step.relation, step.inverse, n) for step, n in steps.items()]
        return sorted(found, key=lambda x: (-x[2], x[0], x[1]))

    def _targets(self, entity: str, relation: str, inverse: bool, timings: Timings) -> list[Triple]:
        with timings.step("graph_ms"):
            facts = self.view.edges([entity], Step(relation, inverse))
        return sorted(set(facts), key=lambda t: (t.head, t.tail))[: self.options.max_entities]

    # -- LLM steps ---------------------------------------------------------------------------
    def _ask(self, prompt: str, timings: Timings, max_tokens: int) -> str:
        with timings.step("llm_ms"):
            return self.llm.complete(LLMRequest.of(prompt, temperature=0.0, max_tokens=max_tokens))

    def _name(self, entity: str) -> str:
        try:
            return self.surface.entity(entity)
        except KGEngineError:
            return entity

    def _relation_name(self, relation: str, inverse: bool) -> str:
        text = self.relation_labels.get(relation) or relation
        return f"{text} (inverse)" if inverse else text

    def _prune_relations(self, question: str, entity: str, candidates: list[tuple[str, bool, int]],
                         reasoning: list[str], timings: Timings) -> list[tuple[str, bool, float]]:
        shown = candidates[: self.options.max_relations]
        names = [self._relation_name(r, inv) for r, inv, _ in shown]
        listed = "\n".join(f"{i}. {n}" for i, n in enumerate(names, 1))
        prompt = self.prompts.relation_prune.fill(width=str(self.options.beam_width), question=question,
                                                  entity=self._name(entity), relations=listed)
        picked = parse_scored(self._ask(prompt, timings, PRUNE_MAX_TOKENS), names, self.options.beam_width)
        if not picked:
            reasoning.append(f"relation pruning at {self._name(entity)}: the reply named no offered "
                             f"relation; keeping the {self.options.beam_width} with the most facts")
            width = min(self.options.beam_width, len(shown))
            picked = [(names[i], 1.0 / width) for i in range(width)]
        position = {n: i for i, n in enumerate(names)}
        return [(shown[position[n]][0], shown[position[n]][1], score) for n, score in picked]

    def _prune_entities(self, question: str, relation: str, inverse: bool, targets: list[str],
                        reasoning: list[str], timings: Timings) -> list[tuple[str, float]]:
        if len(targets) <= 1 or not self.options.entity_pruning:
            return [(t, 1.0 / len(targets)) for t in targets]
        names = [self._name(t) for t in targets]
        prompt = self.prompts.entity_prune.fill(question=question,
                                                relation=self._relation_name(relation, inverse),
                                                entities="\n".join(names))
        picked = parse_scored(self._ask(prompt, timings, PRUNE_MAX_TOKENS), names, len(names))
        if not picked:
            reasoning.append(f"entity pruning on {self._relation_name(relation, inverse)}: the reply named "
                             "no offered entity; keeping them in id order")
            return [(t, 1.0 / len(targets)) for t in targets]
        by_name = {n: t for n, t in zip(names, targets, strict=True)}
        return [(by_name[n], score) for n, score in picked]

    def _facts(self, beam: Sequence[Path]) -> list[Triple]:
        return list(dict.fromkeys(t for p in beam for t in p.triples))

    # -- the search --------------------------------------------------------------------------
    def get_answer(self, question: Question, topic: LinkedEntity | None, timings: Timings) -> Answer:
        assert topic is not None
        question_started(self.view)
        for key in ("graph_ms", "llm_ms"):
            timings.ms.setdefault(key, 0.0)
        text, width = question.text, self.options.beam_width
        reasoning = [f"topic entity {topic.id} ({topic.how})"]
        beam = [Path((), topic.id)]
        sufficient = False
        for depth in range(1, self.options.depth + 1):
            extended: list[Path] = []
            for path in beam:
                # every relation, both ways: going back is ruled out by the entities seen
                candidates = self._relations(path.end, timings)
                if not candidates:
                    continue
                for relation, inverse, r_score in self._prune_relations(text, path.end, candidates,
                                                                        reasoning, timings):
                    triples = self._targets(path.end, relation, inverse, timings)
                    by_target = {(t.head if inverse else t.tail): t for t in triples}
                    seen = {topic.id, *(e for t in path.triples for e in (t.head, t.tail))}
                    targets = [e for e in by_target if e not in seen]
                    for entity, e_score in self._prune_entities(text, relation, inverse, targets,
                                                                reasoning, timings):
                        step = f"^{relation}" if inverse else relation
                        extended.append(Path((*path.triples, by_target[entity]), entity,
                                             path.score * r_score * e_score, (*path.relations, step)))
            if not extended:
                reasoning.append(f"depth {depth}: no relation leads further; answering from what was found")
                break
            beam = sorted(extended, key=lambda p: (-p.score, p.triples))[:width]
            reasoning.append(f"depth {depth}: kept " + "; ".join(
                f"{' / '.join(p.relations)} -> {self._name(p.end)} ({p.score:.2f})" for p in beam))
            facts = "\n".join(verbalise(t, self.surface) for t in self._facts(beam))
            verdict = self._ask(self.prompts.reasoning.fill(triples=facts, question=text), timings,
                                REASONING_MAX_TOKENS)
            sufficient = says_yes(verdict)
            reasoning.append(f"depth {depth}: the paths {'suffice' if sufficient else 'do not suffice yet'}")
            if sufficient:
                break
        shown = self._facts(beam)
        facts = "\n".join(verbalise(t, self.surface) for t in shown) or "(no facts found)"
        final = parse_answer_text(self._ask(self.prompts.answer.fill(triples=facts, question=text), timings,
                                            ANSWER_MAX_TOKENS))
        mapped = map_answers(final, self.index, shown, topic.id, self._label, text)
        reasoning.extend(mapped.notes)
        return Answer(question=text, topic_entity=topic.id, method=self.method, answers=mapped.answers,
                      relation_path=list(beam[0].relations) or None,
                      reasoning=reasoning, raw_output=mapped.raw_output)

    def _label(self, entity: str) -> str | None:
        try:
            return self.surface.entity(entity)
        except KGEngineError:
            return None


def build_tog(context: MethodContext, options: ToGOptions) -> ToGAnswerer:
    return ToGAnswerer(context.method, view=context.graph_view(), llm=context.llm(),
                       linker=context.linker(), surface=context.surface(), options=options,
                       relation_labels=context.store.relation_labels(context.graph))


TOG = MethodSpec("Think-on-Graph: LLM-guided beam search from the topic entity (Sun et al., ICLR 2024)",
                 build_tog, ToGOptions, frozenset({Need.LLM}))
