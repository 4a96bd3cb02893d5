"""``--questions llm`` against a real OpenAI-compatible HTTP server started by the test
(tests/fake_llm.py): App. D prompt at temperature 0, rejection and retry, 5xx retry, and the
on-disk cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_llm import FakeRequest
from kgengine.brink.question_writer import LLMQuestionWriter, clean_output, rejection
from kgengine.cli import main
from kgengine.llm import LLMRequest


def entities(prompt: str) -> tuple[str, str]:
    """(topic, answer) of the question the prompt asks for (its last 'Given' block)."""
    topic = re.findall(r"Question Entity: (.+)", prompt)[-1].strip()
    answer = re.findall(r"Answer Entity: (.+)", prompt)[-1].strip()
    return topic, answer


def test_writer_retries_a_500_and_rejects_an_output_naming_the_answer(llm_server, tmp_path: Path) -> None:
    def script(request: FakeRequest) -> tuple[int, str]:
        number, prompt = request.number, request.prompt
        topic, answer = entities(prompt)
        if number == 1:
            return 500, "overloaded"
        if "previous output was rejected" not in prompt:
            return 200, f"Output: Is {answer} the aunt of {topic}?"  # names the answer
        return 200, f'"Whose aunt is {topic}?"'

    server = llm_server(script)
    writer = LLMQuestionWriter("test-model", base_url=server.base_url, cache_dir=tmp_path / "cache",
                               backoff=0.01)
    question = writer.question("7", "aunt", "72", topic="7", answer="72")
    assert question == "Whose aunt is 7?"
    assert writer.stats.as_dict() == {"requests": 2, "cache_hits": 0, "server_retries": 1,
                                      "rejected": 1, "fallbacks": 0}
    first = server.requests[0]
    assert first.path == "/v1/chat/completions"
    assert first.temperature == 0 and first.model == "test-model"
    prompt = first.prompt
    assert prompt.startswith("You are an expert in knowledge graph question generation.")
    assert "Removed Triple: (7, aunt, 72)" in prompt and "Do not mention the Answer Entity 72" in prompt
    assert "it mentions the Answer Entity 72" in server.requests[-1].prompt

    # a second writer on the same cache asks nothing, and the same rejection replays
    again = LLMQuestionWriter("test-model", base_url=server.base_url, cache_dir=tmp_path / "cache")
    sent = len(server.requests)
    assert again.question("7", "aunt", "72", topic="7", answer="72") == "Whose aunt is 7?"
    assert len(server.requests) == sent
    assert again.stats.cache_hits == 2 and again.stats.rejected == 1


def test_writer_falls_back_after_every_attempt_is_rejected(llm_server, tmp_path: Path) -> None:
    server = llm_server(lambda request: (200, "What is the answer?"))  # never names the topic
    writer = LLMQuestionWriter("m", base_url=server.base_url, cache_dir=tmp_path, attempts=3)
    assert writer.question("7", "aunt", "72", topic="7", answer="72") is None
    assert len(server.requests) == 3
    assert writer.stats.fallbacks == 1 and writer.stats.rejected == 3


def test_writer_gives_up_on_a_server_that_keeps_failing(llm_server, tmp_path: Path) -> None:
    server = llm_server(lambda request: (503, "down"))
    writer = LLMQuestionWriter("m", base_url=server.base_url, cache_dir=tmp_path, server_retries=2,
                               backoff=0.01)
    with pytest.raises(Exception, match="failed 3 times"):
        writer.question("7", "aunt", "72", topic="7", answer="72")
    assert len(server.requests) == 3
    assert not any(tmp_path.rglob("*.json"))  # failures are never cached


def test_rejection_and_cleaning() -> None:
    assert rejection("Whose aunt is 7?", "7", ["72"]) is None
    assert "does not mention" in rejection("Whose aunt is she?", "7", ["72"])
    assert "Answer Entity 72" in rejection("Is 72 the niece of 7?", "7", ["72"])
    assert "another answer" in rejection("Is 73 the niece of 7?", "7", ["72", "73"])
    assert clean_output('\n  Question: "Who is 7\'s aunt?"\nExplanation: ...') == "Who is 7's aunt?"
    assert LLMRequest.of("p").cache_key("m") != LLMRequest.of("p").cache_key("m2")


@pytest.mark.slow
def test_build_with_llm_questions_and_cached_rebuild(llm_server, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rejected_once: set[str] = set()

    def script(request: FakeRequest) -> tuple[int, str]:
        number, prompt = request.number, request.prompt
        topic, answer = entities(prompt)
        if number == 2:
            return 500, "try again"
        if not rejected_once and "previous output was rejected" not in prompt:
            rejected_once.add(prompt)
            return 200, f"Which relative of {topic} is {answer}?"
        return 200, f"Who is related to {topic}?"

    server = llm_server(script)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rules = tmp_path / "rules.tsv"
    rules.write_text("body\thead\nhusband(?b,?a)\twife(?a,?b)\nwife(?b,?a)\thusband(?a,?b)\n")
    store = str(tmp_path / "store")
    loaded = CliRunner().invoke(main, ["load", "family", "--store", store, "--graph", "family-facts",
                                       "--splits", "facts"])
    assert loaded.exit_code == 0, loaded.output
    args = ["brink", "build", "--store", store, "--graph", "family-facts",
            "--rules", str(rules), "--groundings-per-rule", "4", "--questions", "llm",
            "--llm-base-url", server.base_url, "--llm-model", "test-model",
            "--llm-cache", str(tmp_path / "cache"), "--llm-workers", "1"]
    first = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "one")])
    assert first.exit_code == 0, first.output
    records = [json.loads(line) for s in ("train", "valid", "test")
               for line in (tmp_path / "one" / f"questions_{s}.jsonl").read_text().splitlines()]
    assert records and all(r["question_source"] == "llm" for r in records)
    assert all(r["question"] == f"Who is related to {r['topic_entity']}?" for r in records)
    stats = json.loads((tmp_path / "one" / "stats.json").read_text())
    assert stats["llm"]["server_retries"] == 1 and stats["llm"]["rejected"] == 1
    assert stats["llm"]["requests"] == len(records) + 1
    sent = len(server.requests)

    second = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "two")])
    assert second.exit_code == 0, second.output
    assert len(server.requests) == sent  # every response came from the cache
    again = json.loads((tmp_path / "two" / "stats.json").read_text())["llm"]
    assert again["requests"] == 0 and again["cache_hits"] == len(records) + 1
    for name in ("kg_incomplete.tsv", "questions_train.jsonl", "questions_test.jsonl"):
        assert (tmp_path / "one" / name).read_text() == (tmp_path / "two" / name).read_text()
