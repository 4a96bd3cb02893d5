"""LLM-written questions (BRINK App. D) through any OpenAI-compatible endpoint, with every
response cached on disk so that a rebuild sends nothing.

The endpoint may be OpenAI, vLLM, llama.cpp's server or Ollama: only ``chat.completions``
is used, at temperature 0. A question that omits the topic entity or names the answer is
rejected and asked for again with the reason appended (a new prompt, since at temperature
0 the same prompt would give the same answer); 429/5xx and connection failures are
retried with exponential backoff."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from threading import Lock
from typing import Any

import openai
import platformdirs
from kgengine.brink.questions import mentions
from kgengine.errors import KGEngineError

# BRINK App. D, verbatim but for typography: the paper's extracted text lost the spaces
# after commas and colons and put every line in its own paragraph.
APP_D_PROMPT = "\n".join([
    "You are an expert in knowledge graph question generation.",
    "",
    "Given:",
    "Removed Triple: ({entity_h}, {predicate_T}, {entity_t})",
    "Question Entity: {topic_entity}",
    "Answer Entity: {answer_entity}",
    "",
    "Write a clear, natural-language question that asks for the Answer Entity, "
    "using the given predicate and Topic Entity.",
    "",
    "Requirements:",
    "- Express the predicate {predicate_T} naturally (paraphrasing allowed, but preserve "
    'core meaning; e.g., "wife_of" -> "wife").',
    "- Mention the Topic Entity {topic_entity}.",
    "- The answer should be the Answer Entity {answer_entity}.",
    "- Do not mention the Answer Entity {answer_entity} in the question.",
    "- Do not ask a yes/no question.",
    "- Output only the question as plain text.",
    "",
    "Example:",
    'Removed Triple: ("Alice", "wife_of", "Carol")',
    "Question Entity: Carol",
    "Answer Entity: Alice",
    "Output:",
    "Who is Carol\u2019s wife?",
    "",
    "Now, generate the question for:",
    "Removed Triple: ({entity_h}, {predicate_T}, {entity_t})",
    "Question Entity: {topic_entity}",
    "Answer Entity: {answer_entity}",
])

RETRY_NOTE = """

Your previous output was rejected because {reason}:
{previous}
Write the question again, following every requirement."""

RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError,
             openai.APITimeoutError)


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("kgengine")) / "llm"


def app_d_prompt(head: str, relation: str, tail: str, topic: str, answer: str) -> str:
    return APP_D_PROMPT.format(entity_h=head, predicate_T=relation, entity_t=tail,
                               topic_entity=topic, answer_entity=answer)


def clean_output(text: str) -> str:
    """The question from a model's reply: first non-empty line, without an ``Output:`` /
    ``Question:`` prefix or wrapping quotes (small models add them despite the prompt)."""
    for line in text.strip().splitlines():
        line = line.strip()
        for prefix in ("output:", "question:"):
            if line.lower().startswith(prefix):
                line = line[len(prefix):].strip()
        line = line.strip().strip('"“”').strip()
        if line:
            return line
    return ""


def rejection(question: str, topic: str, answers: Sequence[str]) -> str | None:
    """Why a generated question is unusable, or None. ``answers``: the hard answer first,
    then any other correct answer (naming one of those gives the answer away too)."""
    if not question:
        return "it is empty"
    if not mentions(question, topic):
        return f"it does not mention the Topic Entity {topic}"
    named = next((a for a in answers if mentions(question, a)), None)
    if named is not None:
        return f"it mentions the Answer Entity {named}" if named == answers[0] else (
            f"it mentions {named}, another answer to the question")
    return None


class ResponseCache:
    """One JSON file per (model, prompt), named by their SHA-256, written atomically."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def key(model: str, prompt: str) -> str:
        payload = json.dumps({"model": model, "prompt": prompt, "temperature": 0}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, model: str, prompt: str) -> str | None:
        path = self._path(self.key(model, prompt))
        try:
            return json.loads(path.read_text(encoding="utf-8"))["response"]
        except (OSError, ValueError, KeyError):
            return None

    def put(self, model: str, prompt: str, response: str) -> None:
        path = self._path(self.key(model, prompt))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"model": model, "prompt": prompt, "response": response}),
                       encoding="utf-8")
        os.replace(tmp, path)


@dataclass
class LLMStats:
    requests: int = 0  # HTTP calls that returned a completion
    cache_hits: int = 0
    server_retries: int = 0  # retried 429/5xx/connection failures
    rejected: int = 0  # outputs rejected (topic missing / answer named)
    fallbacks: int = 0  # questions that fell back to the template after every attempt
    _lock: Lock = field(default_factory=Lock, repr=False)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("requests", "cache_hits", "server_retries",
                                              "rejected", "fallbacks")}


class LLMQuestionWriter:
    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        cache_dir: Path | None = None,
        attempts: int = 3,
        server_retries: int = 5,
        backoff: float = 1.0,
        timeout: float = 120.0,
    ) -> None:
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url is None:
                raise KGEngineError("--questions llm needs OPENAI_API_KEY or --llm-base-url")
            key = "unused"  # local OpenAI-compatible servers accept any key
        # our own retry loop (below) owns backoff, so the client's is off
        self.client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)
        self.model = model
        self.cache = ResponseCache(cache_dir or default_cache_dir())
        self.attempts, self.server_retries, self.backoff = attempts, server_retries, backoff
        self.stats = LLMStats()

    def complete(self, prompt: str) -> str:
        cached = self.cache.get(self.model, prompt)
        if cached is not None:
            self.stats.add("cache_hits")
            return cached
        for attempt in range(self.server_retries + 1):
            try:
                response: Any = self.client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "user", "content": prompt}],
                    temperature=0,
                )
                break
            except RETRYABLE as exc:
                if attempt == self.server_retries:
                    raise KGEngineError(f"LLM endpoint failed {attempt + 1} times: {exc}") from exc
                self.stats.add("server_retries")
                time.sleep(self.backoff * 2**attempt)
            except openai.APIStatusError as exc:  # 4xx: retrying will not help
                raise KGEngineError(f"LLM endpoint refused the request: {exc}") from exc
        text = (response.choices[0].message.content or "") if response.choices else ""
        self.stats.add("requests")
        self.cache.put(self.model, prompt, text)
        return text

    def question(self, head: str, relation: str, tail: str, topic: str, answer: str,
                 other_answers: Sequence[str] = ()) -> str | None:
        """A checked question, or None when every attempt was rejected."""
        prompt = app_d_prompt(head, relation, tail, topic, answer)
        forbidden = [answer, *(a for a in other_answers if a != answer)]
        for _ in range(self.attempts):
            question = clean_output(self.complete(prompt))
            reason = rejection(question, topic, forbidden)
            if reason is None:
                return question
            self.stats.add("rejected")
            # notes accumulate, so each attempt is a new prompt (and a new cache entry)
            prompt += RETRY_NOTE.format(reason=reason, previous=question or "(empty)")
        self.stats.add("fallbacks")
        return None
