"""The packaged SmolLM2 served by `kgengine llm serve` (a real subprocess, real HTTP): it
answers /v1/models and chat completions, tells its context length and counts tokens, refuses
an over-long prompt in one line, stops generating when a timed-out stream is closed, and the
CLI's failures (port taken, bad model file) are one line. Skipped without the local-llm extra.

A few short requests only: CI has 2 cores (the model reads ~80 and writes ~40 tokens/s on one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from kgengine.llm import (
    ESTIMATE_RULE,
    LLMError,
    LLMRequest,
    OpenAICompatibleLLM,
    PromptTooLongError,
    estimate_tokens,
)
from kgengine.llm.local import local_endpoint, packaged_models

if TYPE_CHECKING:
    from local_llm import RunningLLM

pytest_plugins = ["local_llm"]  # the session's server (imported as a plugin, not a module: rewritten asserts)
pytestmark = pytest.mark.llm_local


STORY = "Write a very long story about a dragon who loves maths, in ten chapters."


def kgengine(*args: str) -> list[str]:
    return [sys.executable, "-m", "kgengine.cli", *args]


def client(local_llm: RunningLLM, **kwargs: object) -> OpenAICompatibleLLM:
    kwargs.setdefault("cache_dir", "off")  # every request reaches the model
    return OpenAICompatibleLLM(**{**local_llm.client_options(), **kwargs})


def run_cli(*args: str, limit: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(kgengine("llm", "serve", *args), capture_output=True, text=True, timeout=limit)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_the_served_model_answers_models_and_chat(local_llm: RunningLLM) -> None:
    listed = httpx.get(local_llm.base_url + "/models", timeout=10).json()
    assert [m["id"] for m in listed["data"]] == [local_llm.model] == ["smollm2-135m-instruct"]
    loading = [line for line in local_llm.output if line.startswith("loading smollm2-135m-instruct")]
    assert loading and "2048-token context, 1 thread)" in loading[0]
    llm = client(local_llm)
    reply = llm.completion(LLMRequest.of("What is the capital of France? Answer in one word.", max_tokens=16))
    assert reply.text.strip() and reply.finish_reason in ("stop", "length", "runaway")
    assert 0 < reply.completion_tokens <= 16 and llm.stats.requests == 1


def test_the_context_length_and_token_counts_come_from_the_server(local_llm: RunningLLM) -> None:
    llm = client(local_llm, stream=False)  # a plain request: the server reports its usage
    assert llm.settings.context_length is None and llm.context_length == local_llm.context_length == 2048
    assert llm.token_counting == "server"
    texts = ["Who directed Inception?", "(7, aunt, 72)\n(72, husband, 1043)\n(1043, son, 7)",
             "(Inception, directed by, Christopher Nolan)", "Zürich, São Paulo, 東京, Москва",
             "what films did the director of [Inception] also direct?\n" + "(Q42, P31, Q5)\n" * 20,
             "\n".join(f"({1000 + 7 * i}, {rel}, {i * 13 % 997})"  # BRINK Family-style id triples
                       for i, rel in enumerate(["aunt", "husband", "son", "nephew", "mother"] * 40))]
    counts = [llm.count_tokens(t) for t in texts]
    assert all(c > 0 for c in counts)
    # the estimate for servers without a tokenizer never undercounts SmolLM2's tokenizer
    assert all(estimate_tokens(t) >= c for t, c in zip(texts, counts, strict=True)), (counts, ESTIMATE_RULE)
    request = LLMRequest.of(texts[-2], max_tokens=1)
    reply = llm.completion(request)
    assert not reply.usage_estimated and reply.prompt_tokens is not None
    # the chat template adds tokens, within the client's allowance
    assert counts[-2] < reply.prompt_tokens <= llm.count_request_tokens(request)


@pytest.mark.parametrize("stream", [True, False])
def test_an_over_long_prompt_is_a_prompt_too_long_error(local_llm: RunningLLM, stream: bool) -> None:
    # a plain request: llama-cpp-python's HTTP 400; a streamed one: it ends the stream empty
    llm = client(local_llm, retries=2, stream=stream)
    said = (r"about \d+ tokens \(counted by the server's tokenizer, chat template included\) for a context "
            r"of 2048" if stream else r"maximum context length is 2048 tokens")
    with pytest.raises(PromptTooLongError, match=said) as caught:
        llm.complete(LLMRequest.of("word " * 3000, max_tokens=8))
    assert "\n" not in str(caught.value) and llm.stats.retries == 0


@pytest.mark.timeout(300)
def test_a_timed_out_stream_stops_the_generation(local_llm: RunningLLM) -> None:
    long = client(local_llm, timeout=1.0, retries=0)
    with pytest.raises(LLMError, match="timed out after 1 s"):
        long.complete(LLMRequest.of(STORY, max_tokens=1800))
    # had the server kept generating (SmolLM2 writes this story to the full 1800 tokens: 45 s
    # here), this request would wait behind it past its own limit
    quick = client(local_llm, timeout=20.0, retries=0)
    assert quick.complete(LLMRequest.of("Say hello.", max_tokens=8)).strip()


def test_port_taken_bad_model_and_missing_file_are_one_line(local_llm: RunningLLM, tmp_path: Path) -> None:
    taken = one_line_error(run_cli("--port", str(local_llm.port)))
    assert taken == (f"Error: port {local_llm.port} on 127.0.0.1 is in use: pick another with --port "
                     "(or --port 0 for a free one)")
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("not a model")
    assert "is not a GGUF model" in one_line_error(run_cli("--model", str(not_gguf), "--port", "0"))
    assert "does not exist" in one_line_error(run_cli("--model", str(tmp_path / "absent.gguf")))
    broken = tmp_path / "broken.gguf"  # the right magic, then garbage: llama.cpp itself refuses it
    broken.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    error = one_line_error(run_cli("--model", str(broken), "--port", "0", "--threads", "1"))
    assert error.startswith("Error: the llama.cpp server for broken exited (code ")
    assert "while loading" in error


def test_local_endpoint_serves_a_run_and_stops_afterwards() -> None:
    said: list[str] = []
    with local_endpoint(said.append, configured=True) as none:
        assert none is None and said == []  # a configured endpoint wins: nothing started
    with local_endpoint(said.append, configured=False, context_length=512, threads=1) as endpoint:
        assert endpoint is not None and endpoint.context_length == 512
        llm = OpenAICompatibleLLM(**endpoint.client_options(), cache_dir="off")
        assert llm.context_length == 512 and llm.concurrency == 1
        assert llm.complete(LLMRequest.of("Say hello.", max_tokens=8)).strip()
    assert said[0].startswith("no LLM endpoint configured: starting the packaged smollm2-135m-instruct on "
                              "http://127.0.0.1:")
    assert said[1].startswith("smollm2-135m-instruct ready in") and said[-1].startswith("stopping")
    with pytest.raises(httpx.HTTPError):
        httpx.get(endpoint.base_url + "/models", timeout=5)


def test_models_lists_the_packaged_model() -> None:
    result = subprocess.run(kgengine("llm", "models"), capture_output=True, text=True, timeout=60)
    found = packaged_models()[0]
    assert result.returncode == 0 and result.stdout.splitlines() == [
        f"smollm2-135m-instruct\t{found.size / 2**20:.0f} MiB\t{found.path}"]
    assert found.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and found.size > 90 * 2**20

