"""OpenAICompatibleLLM against the shared local OpenAI-compatible server (tests/fake_llm.py):
what is sent, the cache, retries on 5xx/429/timeouts/connection failures, no retry on 400,
and where settings come from (argument > environment > config file > default)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fake_llm import Reply, replies
from kgengine.llm import LLMError, LLMRequest, LLMSettings, OpenAICompatibleLLM, ResponseCache, llm_configured

ENV = ("KGENGINE_LLM_MODEL", "KGENGINE_LLM_BASE_URL", "OPENAI_BASE_URL", "KGENGINE_LLM_API_KEY",
       "OPENAI_API_KEY", "KGENGINE_LLM_TIMEOUT", "KGENGINE_LLM_RETRIES", "KGENGINE_LLM_CACHE")


@pytest.fixture(autouse=True)
def clean_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No LLM setting of the machine running the tests leaks in."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "no-config.toml"))


def client(server, tmp_path: Path, **kwargs) -> OpenAICompatibleLLM:
    kwargs.setdefault("backoff", 0.01)
    return OpenAICompatibleLLM(model="test-model", base_url=server.base_url, cache_dir=tmp_path / "cache",
                               **kwargs)


def test_sends_the_whole_request_and_caches_the_reply(llm_server, tmp_path: Path) -> None:
    server = llm_server(replies("Step 1: find the director.<END> and more"))
    llm = client(server, tmp_path)
    request = LLMRequest.of("decompose this", system="You decompose questions.", stop=["<END>"],
                            max_tokens=256)
    assert llm.complete(request) == "Step 1: find the director."  # the server stops at <END>
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions" and sent.model == "test-model"
    assert sent.messages == [{"role": "system", "content": "You decompose questions."},
                             {"role": "user", "content": "decompose this"}]
    assert sent.stop == ["<END>"] and sent.temperature == 0 and sent.max_tokens == 256

    assert llm.complete(request) == "Step 1: find the director."
    assert len(server.requests) == 1 and llm.stats.as_dict() == {"requests": 1, "cache_hits": 1, "retries": 0}
    # the cache does not depend on the endpoint's address: the same model elsewhere reuses it
    moved = llm_server(replies())
    again = client(moved, tmp_path)
    assert again.complete(request) == "Step 1: find the director." and moved.requests == []


def test_different_stop_temperature_or_model_are_different_entries(llm_server, tmp_path: Path) -> None:
    server = llm_server(lambda request: f"reply {request.number}")
    llm = client(server, tmp_path)
    requests = [LLMRequest.of("q"), LLMRequest.of("q", stop=["?"]), LLMRequest.of("q", temperature=0.5),
                LLMRequest.of("q", max_tokens=5)]
    assert [llm.complete(r) for r in requests] == ["reply 1", "reply 2", "reply 3", "reply 4"]
    other_model = OpenAICompatibleLLM(model="other", base_url=server.base_url, cache_dir=tmp_path / "cache")
    assert other_model.complete(requests[0]) == "reply 5"
    assert [llm.complete(r) for r in requests] == ["reply 1", "reply 2", "reply 3", "reply 4"]
    assert len(server.requests) == 5 and len(ResponseCache(tmp_path / "cache")) == 5
    assert "stop" not in server.requests[0].body and "max_tokens" not in server.requests[0].body
    assert server.requests[2].temperature == 0.5 and server.requests[4].model == "other"


def test_retries_5xx_and_429_with_backoff_then_succeeds(llm_server, tmp_path: Path) -> None:
    server = llm_server(replies(Reply("overloaded", status=500), Reply("slow down", status=429),
                                Reply("down", status=503), "fine"))
    llm = client(server, tmp_path, retries=3)
    assert llm.complete(LLMRequest.of("q")) == "fine"
    assert len(server.requests) == 4 and llm.stats.retries == 3 and llm.stats.requests == 1


def test_retries_a_timeout(llm_server, tmp_path: Path) -> None:
    server = llm_server(replies(Reply("too late", delay=2.0), "in time"))
    llm = client(server, tmp_path, timeout=0.3, retries=1)
    assert llm.complete(LLMRequest.of("q")) == "in time"
    assert len(server.requests) == 2 and llm.stats.retries == 1


def test_gives_up_after_the_last_retry_and_caches_nothing(llm_server, tmp_path: Path) -> None:
    server = llm_server(lambda request: Reply("down", status=502))
    llm = client(server, tmp_path, retries=2)
    with pytest.raises(LLMError, match=r"failed 3 times: HTTP 502"):
        llm.complete(LLMRequest.of("q"))
    assert len(server.requests) == 3 and not (tmp_path / "cache").exists()


def test_a_400_fails_at_once(llm_server, tmp_path: Path) -> None:
    server = llm_server(replies(Reply("unknown model", status=400), "never sent"))
    llm = client(server, tmp_path, retries=5)
    with pytest.raises(LLMError, match=r"refused the request: HTTP 400"):
        llm.complete(LLMRequest.of("q"))
    assert len(server.requests) == 1 and llm.stats.retries == 0


def test_connection_failures_are_retried(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = OpenAICompatibleLLM(model="m", base_url=f"http://127.0.0.1:{port}/v1", cache_dir=tmp_path,
                              retries=2, backoff=0)
    with pytest.raises(LLMError, match=r"failed 3 times: APIConnectionError"):
        llm.complete(LLMRequest.of("q"))
    assert llm.stats.retries == 2


def test_missing_model_or_key_are_clear_errors() -> None:
    assert not llm_configured()
    with pytest.raises(LLMError, match="no LLM model configured"):
        OpenAICompatibleLLM(base_url="http://127.0.0.1:1/v1")
    with pytest.raises(LLMError, match="needs a key: set OPENAI_API_KEY"):
        OpenAICompatibleLLM(model="gpt-4o-mini")  # OpenAI itself, no key


def test_settings_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[llm]\nmodel = "cfg-model"\nbase_url = "http://cfg:8000/v1"\ntimeout = 9\n'
                      'retries = 2\ncache = "off"\n')
    monkeypatch.setenv("KGENGINE_CONFIG", str(config))
    from_file = LLMSettings.resolve()
    f = from_file
    assert (f.model, f.base_url, f.timeout, f.retries, f.cache_dir) == ("cfg-model", "http://cfg:8000/v1",
                                                                        9.0, 2, None)
    assert from_file.sources["model"] == "config [llm] model" and from_file.configured and llm_configured()

    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-env/v1")
    assert LLMSettings.resolve().base_url == "http://openai-env/v1"  # environment beats the file
    monkeypatch.setenv("KGENGINE_LLM_BASE_URL", "http://kgengine-env/v1")
    monkeypatch.setenv("KGENGINE_LLM_MODEL", "env-model")
    monkeypatch.setenv("KGENGINE_LLM_CACHE", str(tmp_path / "env-cache"))
    from_env = LLMSettings.resolve()
    assert (from_env.model, from_env.base_url, from_env.cache_dir) == (
        "env-model", "http://kgengine-env/v1", tmp_path / "env-cache")  # KGENGINE_* beats OPENAI_*
    assert from_env.sources["base_url"] == "$KGENGINE_LLM_BASE_URL"
    from_args = LLMSettings.resolve(model="arg-model", base_url="http://arg/v1", timeout=3)
    assert (from_args.model, from_args.base_url, from_args.timeout) == ("arg-model", "http://arg/v1", 3.0)

    monkeypatch.setenv("KGENGINE_LLM_TIMEOUT", "soon")
    with pytest.raises(LLMError, match=r"\$KGENGINE_LLM_TIMEOUT: 'soon' is not a float"):
        LLMSettings.resolve()


def test_a_client_configured_by_file_alone_talks_to_its_server(llm_server, monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    server = llm_server(replies("from the file's endpoint"))
    config = tmp_path / "config.toml"
    config.write_text(f'[llm]\nmodel = "cfg-model"\nbase_url = "{server.base_url}"\n'
                      f'cache = "{tmp_path / "cache"}"\n')
    monkeypatch.setenv("KGENGINE_CONFIG", str(config))
    llm = OpenAICompatibleLLM()
    assert llm.complete(LLMRequest.of("q")) == "from the file's endpoint"
    assert server.requests[0].model == "cfg-model" and len(ResponseCache(tmp_path / "cache")) == 1
