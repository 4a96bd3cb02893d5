"""The four LLM methods of the KG-RAG paper (§3.4-3.5, §4.2.2), as :class:`Answerer` s:

=========  ===============================================================================
method     pipeline
=========  ===============================================================================
``llm``    the question alone, zero-shot (``rag_answer``)
``llm-qd`` decomposition (in-context examples, chain of thought then sub-questions, stopped
           at ``<END>``); sub-questions answered in order with the zero-shot prompt, each
           later one first reformulated with the earlier sub-answers (stopped at ``?``);
           final synthesis -> reasoning + answer
``llm-kg`` KAPING: candidate triples within N hops of the topic entity, the top-K selected
           for the question, verbalised into the prompt (``rag_answer_kg``)
``full``   decomposition + per-sub-question top-K selection from the candidates + synthesis
=========  ===============================================================================

Every request goes through a :class:`kgengine.llm.LLM` (temperature 0; caching, retries and
timeouts are the LLM's). Prompts are files in ``kgengine/llm/prompts/`` and can be replaced
per answerer (:class:`LLMPrompts`).

Candidate triples are retrieved once per question from the topic entity (the paper's
retrieval step runs beside decomposition, not per sub-question); selection runs per
(reformulated) sub-question. A question the decomposer leaves whole (``None``) is answered
directly, without reformulation or synthesis.

The answer: ``raw_output`` is the final answer text (what a strict evaluator scores);
``answers`` are its pieces (split and normalised as :mod:`kgengine.eval.metrics` does), each
mapped to a graph entity id when it equals an entity's surface form (score 1.0, with the
prompt triples that mention it as evidence) and kept as free text otherwise (score 0.0, the
text as id); ``reasoning`` is the chain (decomposition, each sub-question and its answer,
the synthesis' reasoning)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kgengine.answers import normalize_answer, split_raw_output
from kgengine.errors import KGEngineError, ServiceError
from kgengine.llm import LLM, LLMRequest, Prompt, context_length_of, fit_count, tokens_left
from kgengine.llm.prompt import shipped
from kgengine.model import Direction, Triple
from kgengine.rag.base import (
    DEFAULT_TOP_K,
    Answer,
    BaseAnswerer,
    EntityLinker,
    Evidence,
    LinkedEntity,
    Question,
    Retriever,
    ScoredAnswer,
    Selector,
    Timings,
)
from kgengine.rag.methods import MethodContext, MethodSpec, Need, NoOptions
from kgengine.rag.verbalise import DATASET_IDS, SurfaceForms, verbalise
from kgengine.surface import Surface, parse_surface

END = "<END>"
# KG-RAG paper Table 2 and §3.5.4 (temperature 0 instead of 0.3: reproducible and cacheable)
DECOMPOSE_MAX_TOKENS = 256
ANSWER_MAX_TOKENS = 256
REFORMULATE_MAX_TOKENS = 128
SYNTHESIS_MAX_TOKENS = 512
MAX_SUB_QUESTIONS = 6  # the most the paper saw (Figure 8); more is a runaway decomposition

_NUMBERING = re.compile(r"^\s*(?:\d+\s*[.):]|[-*•])\s*")
_SUB_QUESTIONS = re.compile(r"^\s*sub-?questions\s*:", re.IGNORECASE | re.MULTILINE)
_ANSWER = re.compile(r"^\s*(?:final\s+)?answer\s*:", re.IGNORECASE | re.MULTILINE)
_REASONING = re.compile(r"^\s*reasoning\s*:", re.IGNORECASE)
_NONE = {"none", "none.", "n/a", "no decomposition", "no decomposition needed"}
_INVENTED = re.compile(r"^\s*question\s*:", re.IGNORECASE | re.MULTILINE)
_CONTINUATION = re.compile(r"\n\s*\n|\n\s*(?:question|reasoning|note|explanation|facts?)\s*:", re.IGNORECASE)
_COPIED_FACT = re.compile(r"\(([^()\n]*,[^()\n]*,[^()\n]*)\)")
SENTENCE_WORDS = 4  # a piece of this many words or more is a sentence: entities named in it count
MAX_MENTION_TOKENS = 6
# words never taken as an entity mention in a sentence (a KG may have an entity "is" or "the")
_STOPWORDS = frozenset({
    "is", "are", "was", "were", "be", "been", "it", "its", "he", "she", "they", "them", "his", "her",
    "their", "this", "that", "these", "those", "of", "in", "on", "at", "by", "for", "to", "from",
    "with", "and", "or", "not", "no", "yes", "answer", "answers",
})


class LLMMethodError(KGEngineError):
    pass


@dataclass(frozen=True)
class LLMPrompts:
    """The prompts an answerer fills (defaults: the shipped files of the same names)."""

    answer: Prompt = shipped("rag_answer")
    answer_kg: Prompt = shipped("rag_answer_kg")
    decompose: Prompt = shipped("rag_decompose")
    decompose_examples: Prompt = shipped("rag_decompose_examples")
    reformulate: Prompt = shipped("rag_reformulate")
    synthesis: Prompt = shipped("rag_synthesis")


# ---- parsing (pure) ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Decomposition:
    reasoning: str  # the chain of thought
    sub_questions: tuple[str, ...]  # empty: answer the question as it is
    # the reply had a Sub-questions: line (False: nothing usable came back); said, not compared
    marked: bool = field(default=True, compare=False)


def parse_decomposition(text: str, limit: int = MAX_SUB_QUESTIONS) -> Decomposition:
    """The decomposer's reply (after the prompt's ``Reasoning:``, stopped at ``<END>``):
    reasoning up to ``Sub-questions:``, then one sub-question a line (numbering dropped).
    No ``Sub-questions:`` line, or ``None`` under it: no decomposition."""
    text = text.split(END, 1)[0]
    marker = _SUB_QUESTIONS.search(text)
    reasoning = _REASONING.sub("", (text[: marker.start()] if marker else text).strip(), count=1)
    reasoning = " ".join(reasoning.split())
    if marker is None:
        return Decomposition(reasoning, (), marked=False)
    questions: list[str] = []
    for line in text[marker.end():].splitlines():
        if re.match(r"^\s*question\s*:", line, re.IGNORECASE):
            break  # the model went on to invent another example
        line = _NUMBERING.sub("", line).strip()
        if line and line.lower() not in _NONE:
            questions.append(line)
    return Decomposition(reasoning, tuple(dict.fromkeys(questions))[:limit])


def parse_answer_text(reply: str) -> str:
    """The answer part of a reply: after the last ``Answer:`` line if there is one (the
    synthesis format; models also echo it), else the whole reply; cut where the model goes
    on to write something else (a new ``Question:`` — an example it invents, whose answer is
    not this question's —, a blank line, a ``Reasoning:``/``Note:`` after the answer)."""
    invented = _INVENTED.search(reply)
    if invented is not None and reply[: invented.start()].strip():
        reply = reply[: invented.start()]
    markers = list(_ANSWER.finditer(reply))
    text = (reply[markers[-1].end():] if markers else reply).strip()
    ended = _CONTINUATION.search(text)
    return (text[: ended.start()] if ended else text).strip()


def reply_pieces(text: str, facts: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(answer pieces, notes) of an answer text. A fact the model copied back from the prompt —
    ``(subject, relation, object)``, or one of ``facts`` (the prompt's, as ``subject, relation,
    object``) without its parentheses — is removed whole: split on its commas it would yield
    fragments (``(Shanghai``, or both ends of the fact) that are no answer the model gave. The
    rest is split as the official evaluator splits (commas, newlines)."""
    notes: list[str] = []
    copied = len(_COPIED_FACT.findall(text))
    text = _COPIED_FACT.sub("\n", text)
    for fact in sorted(set(facts), key=len, reverse=True):
        found = re.compile(re.escape(fact), re.IGNORECASE)
        copied += len(found.findall(text))
        text = found.sub("\n", text)
    if copied:
        notes.append(f"the reply copied {copied} fact(s) from the prompt; they are not taken as answers")
    pieces = [p.strip(" .;:\"'") for p in split_raw_output(text)]
    return [p for p in pieces if normalize_answer(p)], notes


def parse_synthesis(reply: str) -> tuple[str, str]:
    """(reasoning, answer text) of a synthesis reply."""
    markers = list(_ANSWER.finditer(reply))
    head = reply[: markers[-1].start()] if markers else ""
    reasoning = " ".join(_REASONING.sub("", head.strip(), count=1).split())
    return reasoning, parse_answer_text(reply)


def reformulated(reply: str, original: str) -> str:
    """The reformulator's question (generation stops at ``?``, so it is put back); the
    original sub-question when the reply is empty."""
    line = next((ln.strip() for ln in reply.strip().splitlines() if ln.strip()), "")
    for prefix in ("rewritten question:", "question:"):
        if line.lower().startswith(prefix):
            line = line[len(prefix):].strip()
    line = line.strip('"“” ')
    return f"{line.rstrip('?').rstrip()}?" if line else original


# ---- entity mapping --------------------------------------------------------------------------
Resolver = Callable[[str], str | None]


class SurfaceIndex:
    """Normalised surface form -> entity id, for mapping answer pieces back to the graph:
    the entities of the prompt (topic entity, triples) first, then every entity the surface
    forms know (labels / private ids), then an optional resolver (e.g. a store lookup)."""

    def __init__(self, surface: SurfaceForms, resolve: Resolver | None = None) -> None:
        self.surface, self.resolve = surface, resolve
        self._global: dict[str, str] | None = None

    def _global_index(self) -> dict[str, str]:
        if self._global is None:
            mapping: Mapping[str, str] = {}
            if self.surface.kind == Surface.TEXT:
                mapping = self.surface.labels
            elif self.surface.kind == Surface.PRIVATE:
                mapping = self.surface.private_ids
            index: dict[str, str] = {}
            for entity, text in mapping.items():
                index.setdefault(normalize_answer(text), entity)
            self._global = index
        return self._global

    def local(self, entities: Iterable[str]) -> dict[str, str]:
        index: dict[str, str] = {}
        for entity in entities:
            try:
                index.setdefault(normalize_answer(self.surface.entity(entity)), entity)
            except KGEngineError:  # an entity without a private id cannot be named by the LLM
                continue
        return index

    def lookup(self, piece: str, local: Mapping[str, str]) -> str | None:
        key = normalize_answer(piece)
        if not key:
            return None
        found = local.get(key) or self._global_index().get(key)
        if found is None and self.resolve is not None:
            found = self.resolve(piece)
        return found


# ---- the answerer ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pipeline:
    """What tells the four KG-RAG methods apart."""

    uses_kg: bool  # retrieve candidate triples and put the top-K in each answering prompt
    decomposes: bool  # decompose into sub-questions, answer them in order, synthesise


@dataclass
class _Run:
    """One question's working state: timings (ms), prompt triples, reasoning lines."""

    timings: Timings
    shown: list[Triple] = field(default_factory=list)  # every triple put in a prompt
    reasoning: list[str] = field(default_factory=list)
    deadline: float | None = None  # time.monotonic() by which the question must be done
    requests: int = 0


class LLMAnswerer(BaseAnswerer):
    """One of the four KG-RAG LLM methods (``pipeline`` says which; ``method`` is its name).

    ``retriever``/``selector``/``top_k``: candidate retrieval and top-K selection (required
    when the pipeline uses the KG). ``surface``: how entities are written in prompts and
    matched in replies (default: the selector's own surface forms if it has them, else
    dataset ids). ``linker``: links the topic entity (without one a given topic is taken as
    an id). ``resolve``: maps an answer piece the prompt did not show to an entity id.

    ``answer`` keeps its working state per call, so one answerer may serve several threads
    when its LLM, retriever and selector can (:class:`kgengine.llm.OpenAICompatibleLLM` can)."""

    def __init__(
        self,
        method: str,
        pipeline: Pipeline,
        *,
        llm: LLM,
        retriever: Retriever | None = None,
        selector: Selector | None = None,
        top_k: int = DEFAULT_TOP_K,
        surface: SurfaceForms | None = None,
        linker: EntityLinker | None = None,
        resolve: Resolver | None = None,
        prompts: LLMPrompts | None = None,
        max_sub_questions: int = MAX_SUB_QUESTIONS,
        question_timeout: float | None = None,
    ) -> None:
        if pipeline.uses_kg and (retriever is None or selector is None):
            raise LLMMethodError(f"method {method} needs a retriever and a selector")
        if top_k < 1:
            raise LLMMethodError(f"top_k must be at least 1, got {top_k}")
        self.method, self.llm, self.retriever, self.selector = method, llm, retriever, selector
        self.top_k, self.entity_linker, self.max_sub_questions = top_k, linker, max_sub_questions
        own_surface = getattr(selector, "surface", None)
        self.surface = surface or (own_surface if isinstance(own_surface, SurfaceForms) else DATASET_IDS)
        self.index = SurfaceIndex(self.surface, resolve)
        self.prompts = prompts or LLMPrompts()
        self.uses_kg, self.decomposes = pipeline.uses_kg, pipeline.decomposes
        self.needs_topic = pipeline.uses_kg
        self.error_class = LLMMethodError
        self.question_timeout = question_timeout

    # -- steps -------------------------------------------------------------------------------
    def _ask(self, run: _Run, prompt: str, *, stop: Sequence[str] = (), max_tokens: int) -> str:
        if run.deadline is not None and time.monotonic() > run.deadline:
            raise ServiceError(f"the question's time limit ({self.question_timeout:g} s) ran out after "
                                 f"{run.requests} LLM request(s)")
        run.requests += 1
        with run.timings.step("llm_ms"):
            return self.llm.complete(LLMRequest.of(prompt, temperature=0.0, stop=stop, max_tokens=max_tokens))

    def _candidates(self, run: _Run, question: Question, entity: str) -> list[Triple]:
        assert self.retriever is not None
        with run.timings.step("retrieve_ms"):
            return self.retriever.search(question, entity)

    def _select(self, run: _Run, question: Question, candidates: Sequence[Triple]) -> list[Triple]:
        assert self.selector is not None
        with run.timings.step("select_ms"):
            return self.selector.select(question, candidates, self.top_k) if candidates else []

    def _fit(self, run: _Run, lines: list[str], question: str) -> list[str]:
        """The facts that fit the LLM's context with the prompt and its reply (all of them when
        the context length is unknown); a cut is said in the reasoning."""
        bare = LLMRequest.of(self.prompts.answer_kg.fill(question=question, triples=""),
                             max_tokens=ANSWER_MAX_TOKENS)
        left = tokens_left(self.llm, bare)
        if left is None:
            return lines
        if left <= 0:
            raise LLMMethodError(f"the prompt alone does not fit the LLM's {context_length_of(self.llm)}"
                                 "-token context with room for the reply")
        kept = fit_count(self.llm, lines, left)
        if kept < len(lines):
            run.reasoning.append(f"Context budget: {kept} of the {len(lines)} selected triples fit the "
                                 f"{context_length_of(self.llm)}-token context; the rest were left out.")
        return lines[:kept]

    def _answer_one(self, run: _Run, question: Question, candidates: Sequence[Triple] | None) -> str:
        """A (sub-)question's answer: zero-shot, or KAPING with its own top-K triples."""
        if candidates is None:
            prompt = self.prompts.answer.fill(question=question.text)
        else:
            chosen = self._select(run, question, candidates)
            lines = self._fit(run, [verbalise(t, self.surface) for t in chosen], question.text)
            run.shown.extend(chosen[: len(lines)])
            prompt = self.prompts.answer_kg.fill(question=question.text,
                                                 triples="\n".join(lines) or "(no facts found)")
        return parse_answer_text(self._ask(run, prompt, max_tokens=ANSWER_MAX_TOKENS))

    def _decompose(self, run: _Run, text: str) -> Decomposition:
        prompt = self.prompts.decompose.fill(examples=self.prompts.decompose_examples.fill(), question=text)
        reply = self._ask(run, prompt, stop=[END], max_tokens=DECOMPOSE_MAX_TOKENS)
        return parse_decomposition(reply, self.max_sub_questions)

    def _reformulate(self, run: _Run, sub_question: str, steps: Sequence[tuple[str, str]]) -> str:
        previous = "\n".join(f"{i}. {q} -> {a or '(no answer)'}" for i, (q, a) in enumerate(steps, 1))
        prompt = self.prompts.reformulate.fill(previous=previous, sub_question=sub_question)
        return reformulated(self._ask(run, prompt, stop=["?"], max_tokens=REFORMULATE_MAX_TOKENS),
                            sub_question)

    # -- the pipeline --------------------------------------------------------------------------
    def get_answer(self, question: Question, topic: LinkedEntity | None, timings: Timings) -> Answer:
        run = _Run(timings, deadline=None if self.question_timeout is None
                   else time.monotonic() + self.question_timeout)
        entity = topic.id if topic is not None else None
        candidates: list[Triple] | None = None
        if self.uses_kg:
            assert entity is not None  # needs_topic
            for key in ("retrieve_ms", "select_ms"):
                timings.ms.setdefault(key, 0.0)
            candidates = self._candidates(run, question, entity)
            run.reasoning.append(f"Retrieved {len(candidates)} candidate triples around the topic "
                                 f"entity; the top {self.top_k} per question go in the prompt.")
        timings.ms.setdefault("llm_ms", 0.0)
        asked = Question(question.text, entity)
        if not self.decomposes:
            final = self._answer_one(run, asked, candidates)
        else:
            final = self._decomposed(run, asked, candidates)
        return self._result(run, question, entity, final)

    def _decomposed(self, run: _Run, question: Question, candidates: list[Triple] | None) -> str:
        text = question.text
        plan = self._decompose(run, text)
        if plan.reasoning:
            run.reasoning.append(f"Decomposition: {plan.reasoning}")
        if not plan.sub_questions:
            run.reasoning.append("No decomposition: the question is answered as it is." if plan.marked else
                                 "The decomposition gave nothing usable (no Sub-questions: line): the "
                                 "question is answered whole.")
            return self._answer_one(run, question, candidates)
        steps: list[tuple[str, str]] = []
        for number, sub_question in enumerate(plan.sub_questions, 1):
            asked = sub_question if not steps else self._reformulate(run, sub_question, steps)
            sub_answer = self._answer_one(run, Question(asked, question.topic_entity), candidates)
            steps.append((asked, sub_answer))
            shown = asked if asked == sub_question else f"{asked} (reformulated from: {sub_question})"
            run.reasoning.append(f"Sub-question {number}: {shown} -> {sub_answer or '(no answer)'}")
        listed = "\n".join(f"{i}. {q}\n   Answer: {a or '(no answer)'}" for i, (q, a) in enumerate(steps, 1))
        prompt = self.prompts.synthesis.fill(question=text, reasoning=plan.reasoning or "(none)",
                                             steps=listed)
        why, final = parse_synthesis(self._ask(run, prompt, max_tokens=SYNTHESIS_MAX_TOKENS))
        if why:
            run.reasoning.append(f"Synthesis: {why}")
        return final

    def _result(self, run: _Run, question: Question, entity: str | None, final: str) -> Answer:
        mapped = map_answers(final, self.index, run.shown, entity, self._label, question.text)
        run.reasoning.extend(mapped.notes)
        if not mapped.answers:
            run.reasoning.append("The reply named no answer." if not final.strip() else
                                 f"No answer could be read from the reply {final[:200]!r}.")
        return Answer(question=question.text, topic_entity=entity, method=self.method,
                      answers=mapped.answers, reasoning=run.reasoning, raw_output=mapped.raw_output)

    def _label(self, entity: str) -> str | None:
        try:
            return self.surface.entity(entity)
        except KGEngineError:
            return None


@dataclass
class MappedAnswers:
    answers: list[ScoredAnswer]
    raw_output: str  # what a strict evaluator scores: the answers as the reply named them
    notes: list[str]


def map_answers(text: str, index: SurfaceIndex, shown: Sequence[Triple], topic: str | None,
                label: Callable[[str], str | None], question: str = "") -> MappedAnswers:
    """An LLM's final answer text as answers. Each piece (:func:`reply_pieces`) that equals an
    entity's surface form is that entity (score 1.0, with the prompt triples that mention it as
    evidence); a piece that is a sentence ("The director is Christopher Nolan") gives the
    entities it names, longest mention first, never the topic entity or one the question
    names; any other piece stays free text (score 0.0, the text as id)."""
    pieces, notes = reply_pieces(text, [verbalise(t, index.surface)[1:-1] for t in dict.fromkeys(shown)])
    shown_entities = (e for t in shown for e in (t.head, t.tail))
    local = index.local([*([topic] if topic else []), *shown_entities])
    asked = {normalize_answer(question)}
    answers: dict[str, ScoredAnswer] = {}
    written: list[str] = []

    def add(entity: str, as_written: str) -> None:
        if entity in answers:
            return
        evidence = [Evidence(path=(t,)) for t in dict.fromkeys(shown) if entity in (t.head, t.tail)]
        answers[entity] = ScoredAnswer(id=entity, score=1.0, label=label(entity), evidence=evidence)
        written.append(as_written)

    for piece in pieces:
        found = index.lookup(piece, local)
        if found is not None:
            add(found, piece)
            continue
        named = _mentions(piece, index, local) if len(piece.split()) >= SENTENCE_WORDS else []
        named = [(e, w) for e, w in named if e != topic and not _in_text(w, asked)]
        if named:
            notes.append(f"the reply answered in a sentence; taken from it: {', '.join(w for _, w in named)}")
            for entity, words in named:
                add(entity, words)
            continue
        key = f"text:{normalize_answer(piece)}"
        if key not in answers:
            answers[key] = ScoredAnswer(id=piece, score=0.0, label=piece)
            written.append(piece)
    return MappedAnswers(list(answers.values()), ", ".join(written), notes)


def _in_text(words: str, texts: set[str]) -> bool:
    needle = f" {normalize_answer(words)} "
    return any(needle in f" {t} " for t in texts)


def _mentions(sentence: str, index: SurfaceIndex, local: Mapping[str, str]) -> list[tuple[str, str]]:
    """(entity, words) for the entity names in ``sentence``: its word n-grams looked up in the
    surface index, longest first, non-overlapping, in sentence order."""
    tokens = sentence.split()
    taken = [False] * len(tokens)
    found: list[tuple[int, str, str]] = []
    for size in range(min(MAX_MENTION_TOKENS, len(tokens)), 0, -1):
        for start in range(len(tokens) - size + 1):
            if any(taken[start : start + size]):
                continue
            words = " ".join(tokens[start : start + size]).strip(" .,;:!?\"'()[]")
            entity = index.lookup(words, local) if normalize_answer(words) not in _STOPWORDS else None
            if entity is not None:
                taken[start : start + size] = [True] * size
                found.append((start, entity, words))
    return [(entity, words) for _, entity, words in sorted(found)]


def build_llm_answerer(method: str, *, llm: LLM, labels: str | Surface | None = None, **parts: Any
                       ) -> LLMAnswerer:
    """The answerer of one registered KG-RAG LLM method from parts a Python user builds
    (``parts``: :class:`LLMAnswerer`'s keyword arguments); methods that use the KG need
    ``retriever`` and ``selector``, the others ignore them.

    Entities are written (and replies matched) in ``surface``; without it, in the selector's
    surface forms (an :class:`EmbeddingSelector` made with ``surface=labels``), else as dataset
    ids. ``labels`` (private|dataset|text), if given, must agree with that choice."""
    from kgengine.rag.methods import method_spec

    spec = method_spec(method)
    if not isinstance(spec, LLMMethodSpec):
        raise LLMMethodError(f"unknown LLM method {method!r} (not one of the KG-RAG LLM methods)")
    own_surface = getattr(parts.get("selector"), "surface", None)
    if parts.get("surface") is None and isinstance(own_surface, SurfaceForms):
        parts["surface"] = own_surface  # prompts and answer mapping write entities as selection does
    if labels is not None:
        wanted = parse_surface(labels)
        kind = parts["surface"].kind if parts.get("surface") is not None else Surface.DATASET
        if wanted != kind:
            raise LLMMethodError(f"labels={wanted.value} but the surface forms given are {kind.value}: pass "
                                 f"surface=SurfaceForms.from_store(store, graph, {wanted.value!r}) or a "
                                 f"selector made with surface={wanted.value!r}")
    if not spec.pipeline.uses_kg:
        parts["retriever"] = parts["selector"] = None
    return LLMAnswerer(method, spec.pipeline, llm=llm, **parts)


# ---- the registered methods ---------------------------------------------------------------------
@dataclass(frozen=True)
class DecomposeOptions:
    max_sub_questions: int = MAX_SUB_QUESTIONS  # more is a runaway decomposition


@dataclass(frozen=True)
class RetrievalOptions:
    direction: Direction = Direction.BOTH  # k-hop retrieval direction
    hub_cap: int | None = None  # k-hop retrieval: neighbours kept per hub entity
    embed_whole_graph: bool = False  # embed every triple first (on-disk cache) instead of as met


@dataclass(frozen=True)
class FullOptions(RetrievalOptions, DecomposeOptions):
    pass


def _build(context: MethodContext, options: Any, pipeline: Pipeline) -> LLMAnswerer:
    llm = context.llm()  # first: the endpoint is checked before retrieval and selection are set up
    retriever = selector = None
    if pipeline.uses_kg:
        retriever = context.retriever(options.direction, options.hub_cap)
        selector = context.selector(options.embed_whole_graph)
    return LLMAnswerer(context.method, pipeline, llm=llm, retriever=retriever, selector=selector,
                       top_k=context.settings.top_k, surface=context.surface(), linker=context.linker(),
                       max_sub_questions=getattr(options, "max_sub_questions", MAX_SUB_QUESTIONS),
                       question_timeout=context.settings.question_timeout)


@dataclass(frozen=True)
class LLMMethodSpec(MethodSpec):
    pipeline: Pipeline = Pipeline(False, False)


def _spec(summary: str, pipeline: Pipeline, options: type, **flags: bool) -> LLMMethodSpec:
    needs = {Need.LLM} | ({Need.EMBEDDINGS} if pipeline.uses_kg else set())
    return LLMMethodSpec(summary, partial(_build, pipeline=pipeline), options, frozenset(needs),
                         pipeline=pipeline, **flags)


LLM_ONLY = _spec("the LLM alone, zero-shot (KG-RAG paper)", Pipeline(False, False), NoOptions)
LLM_QD = _spec("LLM with question decomposition (KG-RAG paper)", Pipeline(False, True), DecomposeOptions)
LLM_KG = _spec("LLM with the top-K retrieved triples in the prompt (KAPING; KG-RAG paper)",
               Pipeline(True, False), RetrievalOptions)
FULL = _spec("decomposition + per-sub-question retrieved triples + synthesis (KG-RAG paper)",
             Pipeline(True, True), FullOptions, default_with_llm=True)
