"""The four KG-RAG LLM methods (kgengine.rag.llm_methods) against the shared local
OpenAI-compatible server (tests/fake_llm.py), on a real Oxigraph store with the real k-hop
retriever and the real embedding selector (all-MiniLM-L6-v2): what each prompt holds (the
top-K triples the selector picks, the in-context examples, ``<END>`` as stop, earlier
sub-answers in later sub-questions), parsing and entity mapping, the cache, retries."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeRequest, Reply, replies
from helpers.toy_kg import ENTITIES, MOVIES
from kgengine.llm import LLMRequest, OpenAICompatibleLLM, PromptError, load_prompt, read_prompt
from kgengine.model import Question, Triple
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag.base import LinkedEntity
from kgengine.rag.llm_methods import (
    LLMAnswerer,
    LLMMethodError,
    LLMMethodSpec,
    LLMPrompts,
    Pipeline,
    build_llm_answerer,
)
from kgengine.rag.methods import method_names, method_spec
from kgengine.rag.retrieval import KHopRetriever
from kgengine.rag.selection import EmbeddingSelector
from kgengine.rag.verbalise import verbalise

T = Triple
TWO_HOP = "which movies share the director of [Inception]"
DECOMPOSITION = ("First find who directed Inception. Then find the movies directed by that person.\n"
                 "Sub-questions:\n1. Who directed Inception?\n"
                 "2. Which movies were directed by the director of Inception?\n"
                 "<END>\nQuestion: an example the model went on to invent")


@pytest.fixture(scope="module")
def movies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("rag-llm")
    store = OxigraphStore(str(folder / "store"))
    store.load("movies", MOVIES, dataset="tsv")
    yield {"store": store, "graph": "movies",
           "selector": EmbeddingSelector(store, "movies", cache_dir=folder / "embeddings"),
           "embeddings": folder / "embeddings"}
    store.close()


def prompt_kind(prompt: str) -> str:
    for kind, start in (("decompose", "You decompose questions"), ("reformulate", "Rewrite the question"),
                        ("synthesis", "Answer the main question"), ("answer_kg", "Below are facts"),
                        ("answer", "Answer the question.")):
        if prompt.startswith(start):
            return kind
    raise AssertionError(f"unknown prompt: {prompt[:80]!r}")


def asked(prompt: str) -> str:
    """The (sub-)question a prompt asks: its last 'Question: ...' line."""
    return re.findall(r"^Question: (.*)$", prompt, re.MULTILINE)[-1]


def facts(prompt: str) -> list[str]:
    """The triples block of a KAPING prompt."""
    block = prompt.split("might be relevant to answer the question.\n\n", 1)[1].split("\n\n", 1)[0]
    return block.splitlines()


def movie_script(request: FakeRequest) -> Reply | str:
    """A well-behaved model for the two-hop question; anything unexpected is a 400 (which
    fails the test, since the client does not retry it)."""
    kind = prompt_kind(request.prompt)
    if kind == "decompose":
        return DECOMPOSITION
    if kind == "reformulate":
        return "Which movies were directed by Christopher Nolan? (rewritten)"  # cut at '?'
    if kind == "synthesis":
        return ("Reasoning: Christopher Nolan directed Inception, and he also directed Interstellar "
                "and Dunkirk.\nAnswer: Interstellar, Dunkirk")
    question = asked(request.prompt)
    if question in ("Who directed Inception?", "who directed [Inception]"):
        return "Christopher Nolan"
    if question == "Which movies were directed by Christopher Nolan?":
        return "Interstellar, Dunkirk, Inception"
    return Reply(f"unexpected question {question!r}", status=400)


def llm_for(server: Any, tmp_path: Path, **kwargs: Any) -> OpenAICompatibleLLM:
    kwargs.setdefault("backoff", 0.01)
    return OpenAICompatibleLLM(model="test-model", base_url=server.base_url, api_key="k",
                               cache_dir=tmp_path / "llm-cache", **kwargs)


def answerer(method: str, movies: dict[str, Any], llm: Any, hops: int = 1, top_k: int = 3,
             **kwargs: Any) -> LLMAnswerer:
    retriever = KHopRetriever(movies["store"], movies["graph"], hops=hops)
    return build_llm_answerer(method, llm=llm, retriever=retriever, selector=movies["selector"],
                              top_k=top_k, **kwargs)


def expected_facts(movies: dict[str, Any], question: str, hops: int, top_k: int) -> list[Triple]:
    """What the selector picks from the retriever's candidates, computed apart from the answerer."""
    candidates = KHopRetriever(movies["store"], movies["graph"], hops=hops).search(
        Question(question, "Inception"), "Inception")
    return movies["selector"].select(Question(question, "Inception"), candidates, top_k)


def test_llm_kg_puts_the_selected_top_k_triples_in_the_prompt(movies, llm_server, tmp_path: Path) -> None:
    server = llm_server(movie_script)
    answer = answerer("llm-kg", movies, llm_for(server, tmp_path), top_k=3).answer(
        Question("who directed [Inception]", "Inception"))
    (request,) = server.requests
    expected = expected_facts(movies, "who directed [Inception]", hops=1, top_k=3)
    assert len(expected) == 3 and T("Inception", "directed_by", "Christopher Nolan") in expected
    assert facts(request.prompt) == [verbalise(t) for t in expected]
    assert "(Inception, directed by, Christopher Nolan)" in request.prompt
    assert request.temperature == 0 and request.stop == [] and request.max_tokens == 256
    assert answer.method == "llm-kg" and answer.topic_entity == "Inception"
    assert answer.raw_output == "Christopher Nolan"
    (nolan,) = answer.answers
    assert (nolan.id, nolan.score, nolan.label) == ("Christopher Nolan", 1.0, "Christopher Nolan")
    assert {e.path for e in nolan.evidence} == {(t,) for t in expected if "Christopher Nolan" in t}
    assert set(answer.timings) == {"link_entity_ms", "retrieve_ms", "select_ms", "llm_ms", "total_ms"}
    assert answer.timings["total_ms"] >= answer.timings["llm_ms"] > 0


def test_llm_only_sends_the_question_alone(movies, llm_server, tmp_path: Path) -> None:
    server = llm_server(replies("Answer: Christopher Nolan, Tom Hardy"))
    answer = build_llm_answerer("llm", llm=llm_for(server, tmp_path)).answer(
        Question("who directed [Inception]", "Inception"))
    prompt = server.requests[0].prompt
    assert prompt_kind(prompt) == "answer" and asked(prompt) == "who directed [Inception]"
    assert "(Inception," not in prompt  # no KG in this baseline
    assert answer.raw_output == "Christopher Nolan, Tom Hardy"
    # nothing was shown and no resolver was given: the pieces stay free text
    assert [(a.id, a.score) for a in answer.answers] == [("Christopher Nolan", 0.0), ("Tom Hardy", 0.0)]


def test_llm_qd_decomposes_reformulates_and_synthesises(movies, llm_server, tmp_path: Path) -> None:
    server = llm_server(movie_script)
    known = lambda piece: piece if piece in ENTITIES else None  # noqa: E731 (a store lookup's stand-in)
    answer = build_llm_answerer("llm-qd", llm=llm_for(server, tmp_path), resolve=known).answer(
        Question(TWO_HOP, "Inception"))
    kinds = [prompt_kind(r.prompt) for r in server.requests]
    assert kinds == ["decompose", "answer", "reformulate", "answer", "synthesis"]
    decompose, first, reformulate, second, synthesis = server.requests
    # in-context examples, the question, and <END> as the stop sequence
    assert load_prompt("rag_decompose_examples").text in decompose.prompt
    assert decompose.prompt.endswith(f"Question: {TWO_HOP}\nReasoning:")
    assert decompose.stop == ["<END>"] and decompose.max_tokens == 256 and decompose.temperature == 0
    assert asked(first.prompt) == "Who directed Inception?"
    # the earlier sub-answer goes into the reformulation, whose reply replaces sub-question 2
    assert reformulate.stop == ["?"]
    assert "1. Who directed Inception? -> Christopher Nolan" in reformulate.prompt
    assert asked(reformulate.prompt) == "Which movies were directed by the director of Inception?"
    assert asked(second.prompt) == "Which movies were directed by Christopher Nolan?"
    assert "Reasoning: First find who directed Inception. Then find the movies directed by that person." \
        in synthesis.prompt
    step = "2. Which movies were directed by Christopher Nolan?\n   Answer: Interstellar, Dunkirk, Inception"
    assert step in synthesis.prompt and synthesis.max_tokens == 512

    assert answer.raw_output == "Interstellar, Dunkirk"
    assert [(a.id, a.score) for a in answer.answers] == [("Interstellar", 1.0), ("Dunkirk", 1.0)]
    assert answer.reasoning == [
        "Decomposition: First find who directed Inception. Then find the movies directed by that person.",
        "Sub-question 1: Who directed Inception? -> Christopher Nolan",
        "Sub-question 2: Which movies were directed by Christopher Nolan? (reformulated from: Which movies "
        "were directed by the director of Inception?) -> Interstellar, Dunkirk, Inception",
        "Synthesis: Christopher Nolan directed Inception, and he also directed Interstellar and Dunkirk.",
    ]


def test_full_selects_triples_per_sub_question(movies, llm_server, tmp_path: Path) -> None:
    server = llm_server(movie_script)
    answer = answerer("full", movies, llm_for(server, tmp_path), hops=2, top_k=4).answer(
        Question(TWO_HOP, "Inception"))
    kinds = [prompt_kind(r.prompt) for r in server.requests]
    assert kinds == ["decompose", "answer_kg", "reformulate", "answer_kg", "synthesis"]
    first, second = server.requests[1], server.requests[3]
    expected_first = expected_facts(movies, "Who directed Inception?", hops=2, top_k=4)
    expected_second = expected_facts(movies, "Which movies were directed by Christopher Nolan?", hops=2,
                                     top_k=4)
    assert facts(first.prompt) == [verbalise(t) for t in expected_first]
    assert facts(second.prompt) == [verbalise(t) for t in expected_second]
    assert expected_first != expected_second  # each sub-question gets its own selection
    assert answer.raw_output == "Interstellar, Dunkirk"
    shown = set(expected_first) | set(expected_second)
    for piece, got in zip(["Interstellar", "Dunkirk"], answer.answers, strict=True):
        named = [t for t in shown if piece in (t.head, t.tail)]
        # an answer maps to a graph entity exactly when the prompts showed it, with those triples as evidence
        assert (got.id, got.score) == (piece, 1.0 if named else 0.0)
        assert {e.path for e in got.evidence} == {(t,) for t in named}
    assert answer.reasoning[0].startswith("Retrieved ")
    assert answer.timings["retrieve_ms"] > 0 and answer.timings["select_ms"] > 0


def test_a_question_left_whole_is_answered_directly(movies, llm_server, tmp_path: Path) -> None:
    script_replies = {"decompose": "It asks for one fact of Inception.\nSub-questions:\nNone\n<END>",
                      "answer_kg": "Christopher Nolan"}
    server = llm_server(lambda r: script_replies[prompt_kind(r.prompt)])
    answer = answerer("full", movies, llm_for(server, tmp_path)).answer(
        Question("who directed [Inception]", "Inception"))
    assert [prompt_kind(r.prompt) for r in server.requests] == ["decompose", "answer_kg"]
    assert asked(server.requests[1].prompt) == "who directed [Inception]"
    assert answer.raw_output == "Christopher Nolan" and answer.answers[0].score == 1.0
    assert answer.reasoning[1:] == ["Decomposition: It asks for one fact of Inception.",
                                    "No decomposition: the question is answered as it is."]


def test_a_second_run_is_answered_from_the_cache(movies, llm_server, tmp_path: Path) -> None:
    server = llm_server(movie_script)
    question = Question(TWO_HOP, "Inception")
    first = answerer("full", movies, llm_for(server, tmp_path), hops=2).answer(question)
    sent = len(server.requests)
    assert sent == 5
    llm = llm_for(server, tmp_path)  # a new process would build a new client on the same cache
    again = answerer("full", movies, llm, hops=2).answer(question)
    assert len(server.requests) == sent and llm.stats.as_dict() == {"requests": 0, "cache_hits": 5,
                                                                    "retries": 0}
    # what a run cost (timings, usage) differs; the answer does not
    strip = lambda a: {k: v for k, v in a.to_json().items() if k not in ("timings", "usage")}  # noqa: E731
    assert strip(again) == strip(first)
    assert first.usage["requests"] == 5
    assert again.usage == {"requests": 0, "cache_hits": 5, "prompt_tokens": 0, "completion_tokens": 0}


def test_retries_on_5xx_and_timeouts_inside_a_pipeline(movies, llm_server, tmp_path: Path) -> None:
    def flaky(request: FakeRequest) -> Reply | str:
        if request.number == 2:
            return Reply("overloaded", status=503)  # the first sub-question's first try
        if request.number == 4:
            return Reply("too late", delay=2.0)  # the reformulation's first try
        return movie_script(request)

    server = llm_server(flaky)
    llm = llm_for(server, tmp_path, timeout=0.5, retries=2)
    answer = answerer("full", movies, llm, hops=2).answer(Question(TWO_HOP, "Inception"))
    assert answer.raw_output == "Interstellar, Dunkirk"
    assert len(server.requests) == 7 and llm.stats.retries == 2 and llm.stats.requests == 5
    # a retried request is the same request
    assert server.requests[1].body == server.requests[2].body
    assert server.requests[3].body == server.requests[4].body


def test_private_ids_in_prompts_map_back_to_graph_entities(movies, llm_server, tmp_path: Path) -> None:
    store, graph = movies["store"], movies["graph"]
    private = store.private_ids(graph)
    selector = EmbeddingSelector(store, graph, surface="private", cache_dir=movies["embeddings"])
    server = llm_server(lambda r: private["Christopher Nolan"])
    kaping = build_llm_answerer("llm-kg", llm=llm_for(server, tmp_path),
                                retriever=KHopRetriever(store, graph), selector=selector, top_k=3,
                                labels="private")
    answer = kaping.answer(Question("who directed [Inception]", "Inception"))
    prompt = server.requests[0].prompt
    assert f"({private['Inception']}, directed by, {private['Christopher Nolan']})" in prompt
    assert "Christopher Nolan" not in prompt.split("Question:")[0]  # private ids only in the facts
    assert answer.raw_output == private["Christopher Nolan"]
    nolan = answer.answers[0]
    assert (nolan.id, nolan.label, nolan.score) == ("Christopher Nolan", private["Christopher Nolan"], 1.0)
    # the surface forms reach every graph entity, not only the prompt's: llm-only maps too
    server2 = llm_server(lambda r: f"{private['Tom Hardy']}, nobody")
    only = build_llm_answerer("llm", llm=llm_for(server2, tmp_path), selector=selector).answer(
        Question("who starred in [Inception]", "Inception"))
    assert [(a.id, a.score) for a in only.answers] == [("Tom Hardy", 1.0), ("nobody", 0.0)]


class FirstWordLinker:
    """An entity linker for the test: the bracketed name in the question."""

    def link_mention(self, question: Question) -> LinkedEntity:
        return LinkedEntity(re.search(r"\[(.+?)\]", question.text).group(1), None, "test")


def test_topic_entity_from_a_linker_or_a_clear_error(movies, llm_server, tmp_path: Path) -> None:
    server = llm_server(movie_script)
    no_topic = Question("who directed [Inception]")
    with pytest.raises(LLMMethodError, match="llm-kg needs the question's topic entity"):
        answerer("llm-kg", movies, llm_for(server, tmp_path)).answer(no_topic)
    linked = answerer("llm-kg", movies, llm_for(server, tmp_path), linker=FirstWordLinker()).answer(no_topic)
    assert linked.topic_entity == "Inception" and linked.answers[0].id == "Christopher Nolan"


def test_method_checks() -> None:
    class Echo:
        def complete(self, request: LLMRequest) -> str:
            return request.prompt

    assert [m for m in method_names() if isinstance(method_spec(m), LLMMethodSpec)] == \
        ["llm", "llm-qd", "llm-kg", "full"]
    assert [build_llm_answerer(m, llm=Echo()).method for m in ("llm", "llm-qd")] == ["llm", "llm-qd"]
    with pytest.raises(LLMMethodError, match="unknown LLM method 'offline'"):
        build_llm_answerer("offline", llm=Echo())
    with pytest.raises(LLMMethodError, match="full needs a retriever and a selector"):
        build_llm_answerer("full", llm=Echo())
    assert build_llm_answerer("llm", llm=Echo(), labels="dataset").surface.kind == "dataset"
    with pytest.raises(LLMMethodError, match="labels=text but the surface forms given are dataset"):
        build_llm_answerer("llm", llm=Echo(), labels="text")
    with pytest.raises(LLMMethodError, match="top_k must be at least 1"):
        LLMAnswerer("llm", Pipeline(False, False), llm=Echo(), top_k=0)


def test_prompts_can_be_replaced_by_files_of_ones_own(movies, llm_server, tmp_path: Path) -> None:
    own = tmp_path / "examples.txt"
    own.write_text("Question: what is the capital of [Ruritania]\nReasoning: One fact.\nSub-questions:\n"
                   "None\n<END>\n", encoding="utf-8")
    server = llm_server(lambda r: "One fact.\nSub-questions:\nNone" if prompt_kind(r.prompt) == "decompose"
                        else "Christopher Nolan")
    prompts = LLMPrompts(decompose_examples=read_prompt(own))
    answer = build_llm_answerer("llm-qd", llm=llm_for(server, tmp_path), prompts=prompts).answer(
        Question("who directed [Inception]", "Inception"))
    assert "capital of [Ruritania]" in server.requests[0].prompt
    assert load_prompt("rag_decompose_examples").text not in server.requests[0].prompt
    assert answer.raw_output == "Christopher Nolan"
    # a replacement that expects other placeholders fails on first use, naming itself
    bad = tmp_path / "answer.txt"
    bad.write_text("Q: {query}\n", encoding="utf-8")
    broken = build_llm_answerer("llm", llm=llm_for(server, tmp_path),
                                prompts=LLMPrompts(answer=read_prompt(bad)))
    with pytest.raises(PromptError, match=r"answer.txt: missing query; unknown question"):
        broken.answer(Question("who directed [Inception]", "Inception"))


# ---- robust to what real models send back ------------------------------------------------------
def test_a_sentence_reply_gives_the_entities_it_names_but_not_the_topic(movies, llm_server,
                                                                       tmp_path: Path) -> None:
    server = llm_server(replies("The director of Inception is Christopher Nolan."))
    answer = answerer("llm-kg", movies, llm_for(server, tmp_path), top_k=3).answer(
        Question("who directed [Inception]", "Inception"))
    assert [(a.id, a.score) for a in answer.answers] == [("Christopher Nolan", 1.0)]
    assert answer.raw_output == "Christopher Nolan"
    assert any("answered in a sentence" in line for line in answer.reasoning)


def test_copied_facts_are_no_answers_and_nothing_found_is_said(movies, llm_server, tmp_path: Path) -> None:
    server = llm_server(replies("(Inception, directed by, Christopher Nolan), (Inception, has genre, "
                                "Science Fiction)"))
    answer = answerer("llm-kg", movies, llm_for(server, tmp_path), top_k=3).answer(
        Question("who directed [Inception]", "Inception"))
    assert answer.answers == [] and answer.raw_output == ""
    assert any("copied 2 fact(s)" in line for line in answer.reasoning)
    assert any("No answer could be read" in line for line in answer.reasoning)


def test_retrieved_facts_are_trimmed_to_the_context_and_the_trim_is_said(movies, llm_server,
                                                                        tmp_path: Path) -> None:
    server = llm_server(lambda r: "Christopher Nolan", tokenizer=True, n_ctx=390)
    llm = llm_for(server, tmp_path)
    question = Question("who directed [Inception]", "Inception")
    answer = answerer("llm-kg", movies, llm, top_k=5).answer(question)
    (request,) = server.requests
    shown = facts(request.prompt)
    budget = [line for line in answer.reasoning if line.startswith("Context budget:")]
    assert budget and f"{len(shown)} of the 5 selected triples" in budget[0]
    assert 0 < len(shown) < 5
    # the sent prompt and its reply fit the server's context, as the server counts tokens
    assert llm.count_tokens(request.prompt) + 256 <= 390
    # evidence is only what the model was shown
    assert {t for a in answer.answers for e in a.evidence for t in e.path} <= \
        {t for t in MOVIES if verbalise(t) in shown}


def test_a_questions_time_limit_ends_it_as_an_error_record(movies, llm_server, tmp_path: Path) -> None:
    from kgengine.rag.base import answer_or_error

    server = llm_server(lambda r: Reply(DECOMPOSITION if "decompose" in r.prompt.lower() else "Nolan",
                                        delay=0.3))
    slow = build_llm_answerer("llm-qd", llm=llm_for(server, tmp_path), question_timeout=0.2)
    failed = answer_or_error(slow, Question(TWO_HOP, "Inception"))
    assert failed.error and "time limit (0.2 s) ran out after 1 LLM request" in failed.error
    assert failed.answers == [] and len(server.requests) == 1


def test_an_empty_reply_is_an_error_record_not_a_silent_empty_answer(movies, llm_server,
                                                                     tmp_path: Path) -> None:
    from kgengine.rag.base import answer_or_error

    server = llm_server(lambda r: "")
    failed = answer_or_error(build_llm_answerer("llm", llm=llm_for(server, tmp_path)),
                             Question("who directed [Inception]", "Inception"))
    assert failed.error and "replied nothing" in failed.error
