"""Prompt files: loading by name, placeholder checks on fill, literal braces; the response
cache's keys and entries (pure: no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kgengine.llm import LLMRequest, Prompt, PromptError, ResponseCache, cut_at_stop, load_prompt
from kgengine.llm.prompt import prompt_names, read_prompt

PROMPTS = Path(__file__).resolve().parent.parent / "engine" / "llm" / "prompts"


def test_shipped_prompt_loads_with_its_placeholders_and_without_the_final_newline() -> None:
    prompt = load_prompt("brink_question")
    assert prompt.placeholders == {"entity_h", "predicate_T", "entity_t", "topic_entity", "answer_entity"}
    on_disk = (PROMPTS / "brink_question.txt").read_text(encoding="utf-8")
    assert on_disk.endswith("\n") and prompt.text == on_disk[:-1]
    filled = prompt.fill(entity_h="7", predicate_T="aunt", entity_t="72", topic_entity="7",
                         answer_entity="72")
    assert "{" not in filled and "}" not in filled
    assert "Do not mention the Answer Entity 72 in the question." in filled
    assert filled.count("Removed Triple: (7, aunt, 72)") == 2  # the App. D prompt repeats it


def test_every_shipped_prompt_parses() -> None:
    names = prompt_names()
    assert {p.stem for p in PROMPTS.glob("*.txt")} == set(names)
    for name in names:
        assert load_prompt(name).name == name


def test_fill_rejects_missing_and_unknown_placeholders() -> None:
    prompt = load_prompt("brink_question")
    values = {"entity_h": "a", "predicate_T": "r", "entity_t": "b", "topic_entity": "a"}
    with pytest.raises(PromptError, match=r"brink_question: missing answer_entity placeholder"):
        prompt.fill(values)
    with pytest.raises(PromptError, match=r"unknown colour"):
        prompt.fill(values, answer_entity="b", colour="red")
    with pytest.raises(PromptError, match=r"missing answer_entity; unknown colour"):
        prompt.fill(values, colour="red")


def test_literal_braces_and_values_with_braces() -> None:
    prompt = Prompt.parse("json", 'Reply as JSON: {{"answer": "{x}"}}')
    assert prompt.placeholders == {"x"}
    assert prompt.fill(x="{y}") == 'Reply as JSON: {"answer": "{y}"}'  # a value is never re-parsed
    assert Prompt.parse("none", "no placeholders {{here}}").fill() == "no placeholders {here}"


@pytest.mark.parametrize("text", ["a lone { brace", "a lone } brace", "{0}", "{}", "{a.b}", "{a[0]}",
                                  "{a!r}", "{a:>3}"])
def test_malformed_placeholders_are_errors(text: str) -> None:
    with pytest.raises(PromptError, match="prompt bad"):
        Prompt.parse("bad", text)


def test_unknown_prompt_name_lists_the_shipped_ones(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match=r"no prompt named 'nope' \(shipped prompts: .*brink_question"):
        load_prompt("nope")
    with pytest.raises(PromptError, match="not a plain name"):
        load_prompt("../cache")
    own = tmp_path / "mine.txt"
    own.write_text("Q: {question}\n\n", encoding="utf-8")  # only the last newline is dropped
    prompt = read_prompt(own)
    assert prompt.fill(question="why?") == "Q: why?\n"
    with pytest.raises(PromptError, match="cannot read prompt"):
        read_prompt(tmp_path / "absent.txt")


def test_cache_key_covers_the_whole_request() -> None:
    base = LLMRequest.of("p", stop=["<END>"], max_tokens=256)
    variants = [
        base.cache_key("m2"),
        LLMRequest.of("p2", stop=["<END>"], max_tokens=256).cache_key("m"),
        LLMRequest.of("p", stop=["?"], max_tokens=256).cache_key("m"),
        LLMRequest.of("p", max_tokens=256).cache_key("m"),
        LLMRequest.of("p", stop=["<END>"], max_tokens=512).cache_key("m"),
        LLMRequest.of("p", stop=["<END>"], max_tokens=256, temperature=0.3).cache_key("m"),
        LLMRequest.of("p", stop=["<END>"], max_tokens=256, system="be brief").cache_key("m"),
    ]
    digests = {ResponseCache.digest("chat", k) for k in [base.cache_key("m"), *variants]}
    assert len(digests) == 1 + len(variants)
    # equal requests built differently share one key (temperature 0 and 0.0; list or tuple stop)
    same = LLMRequest.of("p", stop=("<END>",), max_tokens=256, temperature=0)
    assert ResponseCache.digest("chat", same.cache_key("m")) == ResponseCache.digest(
        "chat", base.cache_key("m"))


def test_cache_round_trip_namespaces_and_atomic_files(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    key = LLMRequest.of("p", stop=("?",)).cache_key("m")
    assert cache.get("chat", key) is None
    cache.put("chat", key, "reply")
    assert cache.get("chat", key) == "reply"
    assert cache.get("embeddings", key) is None  # namespaces do not mix
    cache.put("embeddings", {"model": "minilm", "text": "x"}, [0.25, -1.0])
    assert cache.get("embeddings", {"model": "minilm", "text": "x"}) == [0.25, -1.0]
    files = sorted(tmp_path.rglob("*"))
    assert not [f for f in files if f.suffix == ".tmp"]
    entry = cache.path("chat", key)
    assert entry.parent.parent.name == "chat" and json.loads(entry.read_text())["key"]["stop"] == ["?"]
    assert len(cache) == 2
    entry.write_text("{half an entr")  # a damaged entry is a miss, not a crash
    assert cache.get("chat", key) is None
    with pytest.raises(Exception, match="namespace"):
        cache.put("../x", key, "y")


def test_cut_at_stop() -> None:
    assert cut_at_stop("a<END>b?c", ["?", "<END>"]) == "a"
    assert cut_at_stop("who is it? x", ["?"]) == "who is it"
    assert cut_at_stop("nothing", ["<END>"]) == "nothing"
    assert cut_at_stop("keep", []) == "keep"
