"""The method contract, run for every registered method (pykeen-style: a new method is tested
by registering it) on both backends: an :class:`Answer` of the right shape for a question of
the toy movie KG, evidence triples that exist in the store, timings in ms, a question whose
topic is not in the graph as an error record, options checked against the method's
dataclass. The LLM methods talk to the fake OpenAI-compatible server with a generic script.
Then Think-on-Graph's beam search step by step against a scripted server, and through
``kgengine eval`` with its beam width swept."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_llm import FakeRequest
from helpers.kinds import KindCases
from helpers.toy_kg import MOVIES
from kgengine.cli import main
from kgengine.errors import KGEngineError
from kgengine.model import Question
from kgengine.oxigraph.store import OxigraphStore
from kgengine.questions import read_question_file
from kgengine.rag.base import Answer, answer_or_error
from kgengine.rag.methods import (
    METHODS,
    AnswerSettings,
    MethodSpec,
    Need,
    build_answerer,
    method_names,
    method_spec,
    option_keys,
    register_method,
    split_options,
    unregister_method,
)


def generic_reply(request: FakeRequest) -> str:
    """A plausible reply to any of the shipped prompts (the first offered item, a verdict)."""
    prompt = request.prompt
    if prompt.startswith("Please retrieve"):
        offered = re.findall(r"^\d+\. (.+)$", prompt.split("Relations:")[-1], re.MULTILINE)
        return f"1. {offered[0]} (Score: 1.0)"
    if prompt.startswith("Please score the entities"):
        first = prompt.split("Entities:\n")[-1].splitlines()[0]
        return f"{first} (Score: 1.0)"
    if "sufficient for you to answer" in prompt:
        return "{Yes}"
    return "Answer: Christopher Nolan"


@pytest.fixture(params=["oxigraph", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def movie_graph(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[Any, str]]:
    if request.param == "oxigraph":
        store = OxigraphStore(str(tmp_path_factory.mktemp("methods") / "store"))
        store.load("movies", MOVIES, dataset="tsv")
        yield store, "movies"
        store.close()
        return
    server = request.getfixturevalue("neo4j_server")
    store = request.getfixturevalue("neo4j_store")
    graph = server.graph("methods-movies")
    if store.graph_info(graph) is None:
        store.load(graph, MOVIES, dataset="tsv")
    yield store, graph


def settings_for(server: Any, tmp_path: Path) -> AnswerSettings:
    return AnswerSettings(hops=1, top_k=3, cache_dir=tmp_path / "cache", llm_base_url=server.base_url,
                          llm_model="fake", llm_api_key="k", llm_cache=tmp_path / "llm-cache")


@dataclass(frozen=True)
class MethodCase:
    """How the contract exercises one method: the question it answers on the toy movie KG and
    the reply of the fake LLM it may talk to."""

    question: Question = Question("who directed [Inception]", "Inception")
    reply: Callable[[FakeRequest], str] = generic_reply


METHOD_CASES = KindCases[MethodCase](METHODS, {
    "offline": MethodCase(),
    "rule-guided": MethodCase(),
    "llm": MethodCase(),
    "llm-qd": MethodCase(),
    "llm-kg": MethodCase(),
    "full": MethodCase(),
    "tog": MethodCase(),
    "plan": MethodCase(),
}, "tests/test_methods_contract.py")


def option_types(options: type) -> dict[str, Any]:
    """Every option field of a method's dataclass with its type, inherited fields included
    (``__annotations__`` holds only the class's own: ``full``'s are all inherited)."""
    hints = typing.get_type_hints(options)
    return {f.name: hints[f.name] for f in dataclasses.fields(options)}


def int_options(options: type) -> list[str]:
    return [name for name, kind in option_types(options).items() if kind in (int, int | None)]


@pytest.mark.parametrize("method", METHOD_CASES.registry.names())
class TestMethodContract:
    def test_every_method_answers_with_the_shape_the_contract_says(
            self, method: str, movie_graph: tuple[Any, str], llm_server: Any, tmp_path: Path) -> None:
        case = METHOD_CASES.case(method)
        store, graph = movie_graph
        server = llm_server(case.reply)
        answerer = build_answerer(store, graph, method, settings_for(server, tmp_path))
        answer = answer_or_error(answerer, case.question)
        assert isinstance(answer, Answer) and answer.error is None, answer.error
        assert answer.method == method and answer.topic_entity == "Inception"
        assert answer.answers, f"{method} found nothing"
        stored = set(store.triples(graph))
        for scored in answer.answers:
            assert isinstance(scored.score, float)
            for evidence in scored.evidence:
                assert evidence.path and set(evidence.path) <= stored
        assert all(key.endswith("_ms") for key in answer.timings) and answer.timings["total_ms"] > 0
        assert answer.timings["total_ms"] >= max(v for k, v in answer.timings.items() if k != "total_ms")
        json.dumps(answer.to_json())  # an answer record is JSON
        # a topic the graph does not have: one error record, no answers
        failed = answer_or_error(answerer, Question("who directed [Atlantis]", "Atlantis"))
        assert failed.error and "Atlantis" in failed.error and failed.answers == []
        assert failed.to_json()["error"] == failed.error and failed.timings["total_ms"] >= 0
        if Need.LLM in method_spec(method).needs:
            assert server.requests, f"{method} never asked the LLM"
        else:
            assert not server.requests

    def test_options_are_checked_against_the_methods_dataclass(self, method: str) -> None:
        spec = method_spec(method)
        not_an_option = rf"not an option of method '{re.escape(method)}'.*its options"
        with pytest.raises(KGEngineError, match=not_an_option):
            split_options(method, {"no_such_option": "1"})
        shared, own = split_options(method, {"top_k": "7"})
        assert shared == {"top_k": "7"} and isinstance(own, spec.options)
        # every option is checked, inherited ones too
        assert set(option_types(spec.options)) == set(option_keys(spec.options))
        for name in int_options(spec.options):
            with pytest.raises(KGEngineError, match=rf"{name}: 'many' is not a int"):
                split_options(method, {name: "many"})


def test_inherited_options_are_checked_too() -> None:
    """``full``'s options are all inherited (retrieval and decomposition): reading the class's
    own ``__annotations__`` saw none of them."""
    assert {"max_sub_questions", "hub_cap"} <= set(int_options(method_spec("full").options))
    assert set(option_types(method_spec("plan").options)) >= set(option_types(method_spec("offline").options))


def test_a_method_registered_at_run_time_is_listed_built_and_checked(movie_graph: tuple[Any, str]) -> None:
    store, graph = movie_graph

    class Echo:
        method = "echo"

        def answer(self, question: Question) -> Answer:
            return Answer(question.text, question.topic_entity, self.method, raw_output=question.text)

    register_method("echo", MethodSpec("repeats the question", lambda context, options: Echo()))
    try:
        assert "echo" in method_names()
        answer = build_answerer(store, graph, "echo").answer(Question("hello", "Inception"))
        assert answer.raw_output == "hello"
        with pytest.raises(KGEngineError, match="unknown option x"):
            build_answerer(store, graph, "echo", options={"x": "1"})
    finally:
        unregister_method("echo")
    with pytest.raises(KGEngineError, match="unknown method 'echo'"):
        method_spec("echo")


# ---- Think-on-Graph, step by step ------------------------------------------------------------------
def tog_script(request: FakeRequest) -> str:
    """Relation pruning picks directed_by (either way), entity pruning keeps both films, the
    reasoning check says no after depth 1 and yes after depth 2; the answer names the films."""
    prompt = request.prompt
    if prompt.startswith("Please retrieve"):
        if "Topic Entity: Inception" in prompt:
            return "1. directed_by (Score: 0.9): the director\n2. something else (Score: 0.1)"
        return "1. directed_by (inverse) (Score: 1.0)"
    if prompt.startswith("Please score the entities"):
        return "Interstellar (Score: 0.6)\nDunkirk (Score: 0.4)"
    if "sufficient for you to answer" in prompt:
        return "{Yes}" if "Interstellar" in prompt else "{No}. More is needed."
    return "Interstellar, Dunkirk"


def test_tog_walks_two_hops_with_pruning_and_a_reasoning_check(movie_graph: tuple[Any, str],
                                                               llm_server: Any, tmp_path: Path) -> None:
    store, graph = movie_graph
    server = llm_server(tog_script)
    answerer = build_answerer(store, graph, "tog", settings_for(server, tmp_path), {"beam_width": "2"})
    answer = answerer.answer(Question("which movies share the director of [Inception]", "Inception"))
    kinds = [r.prompt.split("\n", 1)[0][:30] for r in server.requests]
    assert len(kinds) == 6  # relations, reasoning (no), relations, entities, reasoning (yes), answer
    first = server.requests[0].prompt
    offered = re.findall(r"^\d+\. (.+)$", first.split("Relations:")[-1], re.MULTILINE)
    # the relations around Inception, computed from the triples (all leave it)
    assert set(offered) == {t.relation for t in MOVIES if t.head == "Inception"}
    second_hop = server.requests[2].prompt
    offered = re.findall(r"^\d+\. (.+)$", second_hop.split("Relations:")[-1], re.MULTILINE)
    assert set(offered) == {f"{t.relation} (inverse)" for t in MOVIES if t.tail == "Christopher Nolan"}
    entities = server.requests[3].prompt.split("Entities:\n")[1].split("\nAnswer:")[0].splitlines()
    # Inception is where the path came from: never offered again
    assert sorted(entities) == ["Dunkirk", "Interstellar"]
    assert [a.id for a in answer.answers] == ["Interstellar", "Dunkirk"]
    assert answer.relation_path == ["directed_by", "^directed_by"]
    assert any("do not suffice yet" in line for line in answer.reasoning)
    assert any(line.startswith("depth 2: the paths suffice") for line in answer.reasoning)
    for scored in answer.answers:
        assert {t.relation for e in scored.evidence for t in e.path} == {"directed_by"}
    assert set(answer.timings) >= {"link_entity_ms", "graph_ms", "llm_ms", "total_ms"}


def test_tog_falls_back_when_a_reply_names_nothing_offered(movie_graph: tuple[Any, str], llm_server: Any,
                                                           tmp_path: Path) -> None:
    store, graph = movie_graph
    server = llm_server(lambda r: "{Yes}" if "sufficient" in r.prompt else
                        ("no idea" if r.prompt.startswith("Please") else "Christopher Nolan"))
    answerer = build_answerer(store, graph, "tog", settings_for(server, tmp_path),
                              {"beam_width": "1", "depth": "1"})
    answer = answerer.answer(Question("who directed [Inception]", "Inception"))
    assert any("named no offered relation" in line for line in answer.reasoning)
    # the fallback keeps the relation with the most facts: ties by name -> directed_by
    assert answer.relation_path == ["directed_by"]
    assert [a.id for a in answer.answers] == ["Christopher Nolan"]


def test_tog_through_eval_sweeps_its_beam_width(tmp_path: Path, llm_server: Any) -> None:
    server = llm_server(tog_script)
    store_dir = tmp_path / "store"
    store = OxigraphStore(str(store_dir))
    store.load("movies", MOVIES, dataset="tsv")
    store.close()
    questions = tmp_path / "questions.jsonl"
    records = [{"id": "q1", "question": "which movies share the director of [Inception]",
                "topic_entity": "Inception", "answers": ["Interstellar", "Dunkirk"],
                "hard_answer": "Dunkirk"}]
    questions.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    read = read_question_file(questions)
    assert [r.question for r in read] == [Question(records[0]["question"], "Inception")]
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "eval", "--questions", str(questions), "--method", "tog", "--graph", "movies",
        "--store", str(store_dir), "--sweep", "beam_width=1,2", "--option", "llm_model=fake",
        "--option", f"llm_base_url={server.base_url}",
        "--option", f"llm_cache={tmp_path / 'llm-cache'}", "--no-plots", "-o", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    keys = sorted(summary["settings"])
    assert keys == ["questions/movies/tog/beam_width=1", "questions/movies/tog/beam_width=2"]
    width1, width2 = (summary["settings"][k] for k in keys)
    # width 1 keeps Interstellar only, so the reasoning check says yes with it: same answer text
    assert width2["hits_hard"] == 1.0 and width2["f1"] == 1.0
    assert width1["hits_any"] == 1.0
    bad = CliRunner().invoke(main, [
        "eval", "--questions", str(questions), "--method", "tog", "--graph", "movies",
        "--store", str(store_dir), "--option", "beam=2", "--no-plots", "-o", str(tmp_path / "bad")])
    assert bad.exit_code != 0 and "beam_width" in bad.output and "Traceback" not in bad.output


# ---- planning: the LLM picks the relation path, the graph answers ---------------------------------
def test_plan_follows_the_path_the_llm_picks_from_those_the_graph_offers(
        movie_graph: tuple[Any, str], llm_server: Any, tmp_path: Path) -> None:
    store, graph = movie_graph
    wanted = "directed by → directed by (reverse)"

    def pick(request: FakeRequest) -> str:
        listed = re.findall(r"^(\d+)\. (.+)$", request.prompt, re.MULTILINE)
        return next(number for number, text in listed if text == wanted)

    server = llm_server(pick)
    settings = AnswerSettings(hops=2, cache_dir=tmp_path / "cache", llm_base_url=server.base_url,
                              llm_model="fake", llm_api_key="k", llm_cache=tmp_path / "llm-cache")
    answerer = build_answerer(store, graph, "plan", settings, {"max_choices": "40", "use_rules": "false"})
    answer = answerer.answer(Question("which movies share the director of [Inception]", "Inception"))
    (request,) = server.requests
    listed = re.findall(r"^\d+\. (.+)$", request.prompt, re.MULTILINE)
    # the graph's one-step paths out of Inception are all offered, each path once
    assert len(listed) == len(set(listed)) and wanted in listed
    assert {"directed by", "written by", "starred actors", "release year", "has genre"} <= set(listed)
    assert answer.relation_path == ["directed_by", "^directed_by"] and answer.learned_from == "llm-plan"
    assert sorted(a.id for a in answer.answers) == ["Dunkirk", "Interstellar"]
    for scored in answer.answers:
        (evidence,) = scored.evidence
        assert [t.relation for t in evidence.path] == ["directed_by", "directed_by"]


def test_plan_falls_back_to_the_offline_proposal_and_says_so(movie_graph: tuple[Any, str], llm_server: Any,
                                                            tmp_path: Path) -> None:
    store, graph = movie_graph
    server = llm_server(lambda r: "I am not sure.")
    answer = build_answerer(store, graph, "plan", settings_for(server, tmp_path)).answer(
        Question("who directed [Inception]", "Inception"))
    assert any("names none of the" in line for line in answer.reasoning)
    assert answer.relation_path == ["directed_by"]
    assert [a.id for a in answer.answers] == ["Christopher Nolan"]


def test_eval_answers_questions_at_once_with_llm_concurrency(tmp_path: Path, llm_server: Any) -> None:
    import threading
    import time

    lock, in_flight, most = threading.Lock(), [0], [0]

    def slow(request: FakeRequest) -> str:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.3)
        with lock:
            in_flight[0] -= 1
        return "Christopher Nolan"

    server = llm_server(slow)
    store_dir = tmp_path / "store"
    with OxigraphStore(str(store_dir)) as store:
        store.load("movies", MOVIES, dataset="tsv")
    questions = tmp_path / "questions.jsonl"
    films = ["Inception", "Interstellar", "Dunkirk", "The Town"]
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": f"who directed [{film}]",
                                             "topic_entity": film, "answers": ["Christopher Nolan"],
                                             "hard_answer": "Christopher Nolan"}) + "\n"
                                 for i, film in enumerate(films)), encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "eval", "--questions", str(questions), "--method", "llm", "--graph", "movies",
        "--store", str(store_dir), "--llm-concurrency", "4", "--option", "llm_model=fake",
        "--option", f"llm_base_url={server.base_url}", "--option", "llm_cache=off", "--no-plots",
        "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert most[0] >= 2  # several questions were with the server at once
    records = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["q0", "q1", "q2", "q3"]  # still written in question order
    assert all(r["usage"]["requests"] == 1 and r["usage"]["cache_hits"] == 0 for r in records)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (figures,) = summary["settings"].values()
    assert figures["cost"]["requests_per_question"] == 1.0 and figures["cost"]["cache_hits"] == 0
    assert figures["cost"]["p50_ms"] >= 300.0
