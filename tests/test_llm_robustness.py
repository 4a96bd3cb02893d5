"""What real models and servers send back, against the fake server (tests/fake_llm.py), one
case each: runaway replies, empty replies, stop sequences the server ignores, an over-long
prompt, a timed-out request (closed, and the retry not queued behind it), bounded concurrency,
token counting (the server's tokenizer or the estimate), the context length, token usage."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLMServer, Reply, StartServer, fake_tokens, replies
from kgengine.llm import (
    EmptyReplyError,
    LLMError,
    LLMRequest,
    LLMStats,
    OpenAICompatibleLLM,
    PromptTooLongError,
    ResponseCache,
    context_length_of,
    count_tokens_of,
    estimate_tokens,
    fit_count,
    request_tokens_of,
    tokens_left,
)
from kgengine.llm.replies import find_loop

ENV = ("KGENGINE_LLM_MODEL", "KGENGINE_LLM_BASE_URL", "OPENAI_BASE_URL", "KGENGINE_LLM_API_KEY",
       "OPENAI_API_KEY", "KGENGINE_LLM_TIMEOUT", "KGENGINE_LLM_RETRIES", "KGENGINE_LLM_CACHE",
       "KGENGINE_LLM_CONTEXT_LENGTH", "KGENGINE_LLM_CONCURRENCY", "KGENGINE_LLM_STREAM")


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "no-config.toml"))


def client(server: FakeLLMServer, tmp_path: Path, **kwargs: Any) -> OpenAICompatibleLLM:
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("cache_dir", tmp_path / "cache")
    return OpenAICompatibleLLM(model="test-model", base_url=server.base_url, **kwargs)


LOOP = "Answer: Paris. " * 60  # 4 fake tokens a round
LONG = " ".join(f"w{i}" for i in range(400))  # 400 fake tokens, no repetition


def eventually(condition: Callable[[], bool], limit: float = 20.0) -> bool:
    """``condition`` once it holds (the server thread notices a closed stream at its next
    write), or False after ``limit`` seconds: a hang guard, not a timing assertion."""
    end = time.monotonic() + limit
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("stream", [True, False])
def test_a_runaway_reply_is_cut_after_its_first_round_and_said(llm_server: StartServer, tmp_path: Path,
                                                               stream: bool) -> None:
    server = llm_server(replies(Reply(LOOP, token_delay=0.005)))
    llm = client(server, tmp_path, stream=stream)
    completion = llm.completion(LLMRequest.of("capital of France?", max_tokens=120))
    assert completion.text == "Answer: Paris." and completion.finish_reason == "runaway"
    assert completion.note is not None and "'Answer: Paris.' repeated" in completion.note
    assert llm.stats.runaway_replies == 1
    generation = server.generations[0]
    if stream:  # seen while streaming: the stream is closed long before max_tokens
        assert "stream was closed" in completion.note and eventually(lambda: generation.cancelled)
        assert generation.sent < 120
    else:
        assert "up to max_tokens" in completion.note and generation.due == 120
    again = client(server, tmp_path, stream=stream).completion(LLMRequest.of("capital of France?",
                                                                              max_tokens=120))
    assert (again.text, again.note, again.cached) == (completion.text, completion.note, True)  # cached as cut


def test_an_unfinished_reply_or_a_short_repetition_is_kept(llm_server: StartServer, tmp_path: Path) -> None:
    prose = " ".join(f"word{i}" for i in range(50))
    server = llm_server(replies(prose, "Paris, Paris, Paris"))
    llm = client(server, tmp_path)
    unfinished = llm.completion(LLMRequest.of("q", max_tokens=10))
    assert unfinished.text == " ".join(f"word{i}" for i in range(10)) and unfinished.finish_reason == "length"
    assert unfinished.note == "the reply reached max_tokens (10) unfinished"
    assert llm.stats.unfinished_replies == 1
    finished = llm.completion(LLMRequest.of("q2", max_tokens=100))  # the model stopped: not a runaway
    assert (finished.text, finished.finish_reason, finished.note) == ("Paris, Paris, Paris", "stop", None)


def test_an_empty_reply_is_an_empty_reply_error_also_from_the_cache(llm_server: StartServer,
                                                                    tmp_path: Path) -> None:
    server = llm_server(replies("", " \n\t ", "<END> the rest"))
    llm = client(server, tmp_path)
    with pytest.raises(EmptyReplyError, match=r"replied nothing \(finish: stop\) to 'first'") as caught:
        llm.complete(LLMRequest.of("first"))
    assert caught.value.completion.text == "" and isinstance(caught.value, LLMError)
    with pytest.raises(EmptyReplyError):
        llm.complete(LLMRequest.of("blank"))
    with pytest.raises(EmptyReplyError, match="before a stop sequence"):
        llm.complete(LLMRequest.of("third", stop=["<END>"]))
    assert llm.stats.empty_replies == 3 and len(server.requests) == 3
    with pytest.raises(EmptyReplyError):  # the same request again: the cached reply, same error
        llm.complete(LLMRequest.of("first"))
    assert len(server.requests) == 3 and llm.stats.cache_hits == 1


@pytest.mark.timeout(60)
def test_a_stop_sequence_the_server_ignores_ends_the_stream(llm_server: StartServer, tmp_path: Path) -> None:
    tail = " and then" * 200
    server = llm_server(lambda r: Reply(f"Step 1: find the director.<END>{tail}",
                                        token_delay=0.01 if r.stream else 0), honour_stop=False)
    llm = client(server, tmp_path)
    assert llm.complete(LLMRequest.of("q", stop=["<END>"])) == "Step 1: find the director."
    generation = server.generations[0]
    assert eventually(lambda: generation.cancelled) and generation.sent < generation.due  # it stopped
    plain = client(server, tmp_path, stream=False, cache_dir="off")
    assert plain.complete(LLMRequest.of("q", stop=["<END>"])) == "Step 1: find the director."


@pytest.mark.parametrize("stream", [True, False])
def test_an_over_long_prompt_is_a_prompt_too_long_error_not_retried(llm_server: StartServer, tmp_path: Path,
                                                                    stream: bool) -> None:
    # a plain request gets HTTP 400; a streamed one (llama-cpp-python) a stream that ends empty
    server = llm_server(lambda r: "never", n_ctx=50)
    llm = client(server, tmp_path, retries=3, stream=stream)
    too_long = (r"about 241 tokens \(estimated, chat template included\) for a context of 50" if stream
                else r"maximum context length is 50 tokens")
    with pytest.raises(PromptTooLongError, match="does not fit test-model's context .*" + too_long) as caught:
        llm.complete(LLMRequest.of("word " * 100))
    assert "\n" not in str(caught.value) and len(server.requests) == 1 and llm.stats.retries == 0
    assert llm.complete(LLMRequest.of("short")) == "never"


def test_a_stream_that_ends_unfinished_is_retried(llm_server: StartServer, tmp_path: Path) -> None:
    server = llm_server(replies(Reply("half a", hang_up=True), "whole reply", Reply("", hang_up=True),
                                "asked plainly", Reply("half", hang_up=True), Reply("half", hang_up=True)))
    llm = client(server, tmp_path, retries=1)
    assert llm.complete(LLMRequest.of("q")) == "whole reply" and llm.stats.retries == 1
    assert server.requests[1].stream
    # an empty unfinished stream and no context length to blame: asked again without streaming
    assert llm.complete(LLMRequest.of("q2")) == "asked plainly" and not server.requests[3].stream
    with pytest.raises(LLMError, match="failed 2 times: the stream ended before the reply was finished"):
        llm.complete(LLMRequest.of("q3"))


def test_a_stock_llama_cpp_server_refusing_a_long_prompt_is_heard_plainly(llm_server: StartServer,
                                                                          tmp_path: Path) -> None:
    # llama-cpp-python without /props: the stream ends empty, the plain retry gets the 400
    server = llm_server(lambda r: "never", n_ctx=50)
    server.n_ctx_props = False
    llm = client(server, tmp_path, retries=3)
    with pytest.raises(PromptTooLongError, match="maximum context length is 50 tokens"):
        llm.complete(LLMRequest.of("word " * 100))
    assert [r.stream for r in server.requests] == [True, False] and llm.context_length is None


@pytest.mark.timeout(60)
def test_a_timed_out_request_is_closed_and_its_retry_is_not_queued(llm_server: StartServer,
                                                                   tmp_path: Path) -> None:
    # one generation at a time, like llama.cpp: a client that merely gave up would leave the
    # first generation running (400 tokens, 8 s) and the retry would wait for it
    server = llm_server(replies(Reply(LONG, token_delay=0.02), "in time"), serial=True)
    llm = client(server, tmp_path, timeout=0.5, retries=1)
    assert llm.complete(LLMRequest.of("q")) == "in time"
    first = server.generations[0]
    assert first.cancelled and not first.finished and first.sent < first.due
    assert server.events == [("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    assert llm.stats.timeouts == 1 and llm.stats.retries == 1


@pytest.mark.timeout(60)
def test_every_attempt_timing_out_is_one_line(llm_server: StartServer, tmp_path: Path) -> None:
    server = llm_server(lambda r: Reply(LONG, token_delay=0.02))
    llm = client(server, tmp_path, timeout=0.3, retries=1)
    with pytest.raises(LLMError, match=r"failed 2 times: timed out after 0.3 s"):
        llm.complete(LLMRequest.of("q"))
    assert eventually(lambda: len(server.generations) == 2 and all(g.cancelled for g in server.generations))
    assert llm.stats.timeouts == 2


@pytest.mark.timeout(60)
def test_a_server_that_stalls_mid_stream_times_out(llm_server: StartServer, tmp_path: Path) -> None:
    # headers and the first event come at once, then nothing for longer than the limit: the
    # read timeout fires inside the stream (an httpx2 error there, not an openai one)
    server = llm_server(replies(Reply(LONG, token_delay=2.0), "in time"))
    llm = client(server, tmp_path, timeout=0.3, retries=1)
    assert llm.complete(LLMRequest.of("q")) == "in time" and llm.stats.timeouts == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("concurrency", [1, 2])
def test_concurrency_is_bounded(llm_server: StartServer, tmp_path: Path, concurrency: int) -> None:
    server = llm_server(lambda r: Reply(f"reply to {r.prompt}", delay=0.2))
    llm = client(server, tmp_path, concurrency=concurrency, cache_dir="off")
    results: dict[int, str] = {}

    def ask(i: int) -> None:
        results[i] = llm.complete(LLMRequest.of(f"q{i}"))

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {i: f"reply to q{i}" for i in range(6)}
    assert 1 <= server.max_in_flight <= concurrency


def test_concurrency_defaults_to_one_on_loopback_and_is_configurable(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    local = OpenAICompatibleLLM(model="m", base_url="http://127.0.0.1:9/v1", cache_dir=tmp_path)
    remote = OpenAICompatibleLLM(model="m", base_url="https://llm.example.org/v1", cache_dir=tmp_path)
    assert (local.concurrency, remote.concurrency) == (1, 4)
    monkeypatch.setenv("KGENGINE_LLM_CONCURRENCY", "8")
    configured = OpenAICompatibleLLM(model="m", base_url="http://localhost:9/v1", cache_dir=tmp_path)
    assert configured.concurrency == 8
    monkeypatch.setenv("KGENGINE_LLM_CONCURRENCY", "0")
    with pytest.raises(LLMError, match=r"\$KGENGINE_LLM_CONCURRENCY: '0' must be at least 1"):
        OpenAICompatibleLLM(model="m", base_url="http://localhost:9/v1")


def test_tokens_are_counted_by_the_servers_tokenizer_when_it_has_one(llm_server: StartServer,
                                                                     tmp_path: Path) -> None:
    server = llm_server(replies(), tokenizer=True)
    llm = client(server, tmp_path)
    text = "Who directed [Inception]? (Inception, directed by, Christopher Nolan)"
    assert llm.token_counting == "server" and llm.count_tokens(text) == len(fake_tokens(text))
    assert count_tokens_of(llm, text) == len(fake_tokens(text))
    lines = [f"(e{i}, r, e{i + 1})" for i in range(40)]  # 7 fake tokens each, 1 per newline
    fits = llm.fit(lines, 50)
    assert llm.count_tokens("\n".join(lines[:fits])) <= 50 < llm.count_tokens("\n".join(lines[:fits + 1]))


def test_without_a_tokenizer_endpoint_the_count_is_an_estimate(llm_server: StartServer,
                                                               tmp_path: Path) -> None:
    server = llm_server(replies())
    llm = client(server, tmp_path)
    texts = ["Who directed Inception?", "(7, aunt, 72)\n(72, husband, 1043)", "Zürich — 東京", ""]
    assert llm.token_counting == "estimate"
    assert [llm.count_tokens(t) for t in texts] == [estimate_tokens(t) for t in texts]
    assert all(estimate_tokens(t) >= len(fake_tokens(t)) for t in texts)
    assert estimate_tokens("(7, aunt, 72)") == 10  # ( 7 , au nt , ␣ 7 2 ): digits, marks, a bare space

    class Bare:  # any LLM: no counter of its own
        def complete(self, request: LLMRequest) -> str:
            return ""

    assert count_tokens_of(Bare(), "(7, aunt, 72)") == 10 and context_length_of(Bare()) is None
    assert tokens_left(Bare(), LLMRequest.of("q")) is None and fit_count(Bare(), ["ab"] * 5, 3) == 2


def test_the_context_length_is_configured_or_read_from_the_server(llm_server: StartServer,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    with_props = llm_server(replies(), n_ctx=2048)
    llm = client(with_props, tmp_path)
    assert llm.context_length == 2048 and context_length_of(llm) == 2048
    calls = with_props.extras_calls
    assert llm.context_length == 2048 and with_props.extras_calls == calls  # asked once
    assert client(with_props, tmp_path, context_length=512).context_length == 512  # configured wins
    silent = llm_server(replies())
    assert client(silent, tmp_path).context_length is None
    monkeypatch.setenv("KGENGINE_LLM_CONTEXT_LENGTH", "8192")
    assert client(silent, tmp_path).context_length == 8192


def test_request_tokens_include_the_chat_template_allowance(llm_server: StartServer, tmp_path: Path) -> None:
    server = llm_server(replies(), tokenizer=True)
    llm = client(server, tmp_path)
    request = LLMRequest.of("one two three", system="be brief", max_tokens=100)
    assert llm.count_request_tokens(request) == request_tokens_of(llm, request) == 3 + 2 + 2 * 8 + 32
    assert tokens_left(llm, request) is None  # no context length known
    sized = client(server, tmp_path, context_length=1000)
    assert tokens_left(sized, request) == 1000 - 100 - 53


@pytest.mark.parametrize("usage", [True, False])
def test_token_usage_is_recorded_per_client_and_per_thread(llm_server: StartServer, tmp_path: Path,
                                                           usage: bool) -> None:
    server = llm_server(lambda r: "one two three four", usage=usage, tokenizer=True)
    llm = client(server, tmp_path, cache_dir="off")
    scopes: dict[str, LLMStats] = {}

    def question(name: str, prompts: list[str]) -> None:
        with llm.stats.track() as scope:
            for prompt in prompts:
                llm.complete(LLMRequest.of(prompt))
        scopes[name] = scope

    threads = [threading.Thread(target=question, args=("a", ["x y"])),
               threading.Thread(target=question, args=("b", ["x y z", "x y z w"]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    a, b = scopes["a"], scopes["b"]
    assert (a.requests, b.requests, a.completion_tokens, b.completion_tokens) == (1, 2, 4, 8)
    if usage:  # the server's counts
        assert (a.prompt_tokens, b.prompt_tokens, a.usage_estimated) == (2, 7, 0)
    else:  # the client's: the server's tokenizer plus the chat-template allowance
        assert (a.prompt_tokens, b.prompt_tokens, a.usage_estimated) == (2 + 40, 7 + 80, 1)
    totals = llm.stats.totals()
    assert totals["requests"] == 3 and totals["prompt_tokens"] == a.prompt_tokens + b.prompt_tokens
    assert llm.stats.as_dict() == {"requests": 3, "cache_hits": 0, "retries": 0}


def test_the_cache_can_be_turned_off(llm_server: StartServer, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    server = llm_server(lambda r: f"reply {r.number}")
    monkeypatch.setenv("KGENGINE_LLM_CACHE", "off")
    llm = OpenAICompatibleLLM(model="m", base_url=server.base_url)
    assert llm.cache is None
    assert [llm.complete(LLMRequest.of("q")) for _ in range(2)] == ["reply 1", "reply 2"]
    on = client(server, tmp_path)
    assert [on.complete(LLMRequest.of("q")) for _ in range(2)] == ["reply 3", "reply 3"]
    assert len(ResponseCache(tmp_path / "cache")) == 1


def test_streaming_can_be_turned_off(llm_server: StartServer, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    server = llm_server(lambda r: "fine")
    monkeypatch.setenv("KGENGINE_LLM_STREAM", "off")
    assert client(server, tmp_path).complete(LLMRequest.of("q")) == "fine"
    assert not server.requests[0].stream
    monkeypatch.setenv("KGENGINE_LLM_STREAM", "sometimes")
    with pytest.raises(LLMError, match=r"\$KGENGINE_LLM_STREAM: 'sometimes' is not on/off"):
        client(server, tmp_path)


def test_find_loop_finds_where_a_repetition_starts() -> None:
    text = "Answer: Paris. Paris. Paris. Paris. Par"
    loop = find_loop(text, repeats=3, min_span=10)
    assert loop is not None and loop.cut(text) == "Answer: Paris." and loop.repeats == 4
    assert find_loop("Paris, London, Rome", repeats=3, min_span=10) is None
    assert find_loop("ha ha ha", repeats=3, min_span=30) is None  # too short to be a runaway
