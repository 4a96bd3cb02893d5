"""Shared LLM parts for every feature (BRINK question writing, the KG-RAG answerers):

- :class:`LLM` — the protocol: ``complete(LLMRequest) -> str``;
- :class:`OpenAICompatibleLLM` — on the ``openai`` client, any OpenAI-compatible endpoint,
  settings from arguments / environment / config file (:class:`LLMSettings`), retries with
  backoff, per-request time limits, bounded concurrency, a :class:`ResponseCache` keyed by the
  full request, replies checked (stop sequences, repetition loops, empty replies) and the
  context budget (``context_length``, ``count_tokens``, ``fit``);
- :mod:`kgengine.llm.local` — the packaged local model (the ``local-llm`` extra): ``kgengine
  llm serve`` and :func:`~kgengine.llm.local.local_endpoint` for a run with no endpoint;
- prompts as files: :func:`load_prompt` (``prompts/NAME.txt``) and :meth:`Prompt.fill`."""

from kgengine.llm.cache import ResponseCache, default_cache_dir
from kgengine.llm.client import (
    LLM,
    Completion,
    EmptyReplyError,
    LLMError,
    LLMRequest,
    LLMSettings,
    LLMStats,
    Message,
    OpenAICompatibleLLM,
    PromptTooLongError,
    context_length_of,
    count_tokens_of,
    fit_count,
    llm_configured,
    request_tokens_of,
    tokens_left,
)
from kgengine.llm.prompt import Prompt, PromptError, load_prompt, prompt_names, read_prompt
from kgengine.llm.replies import ESTIMATE_RULE, cut_at_stop, estimate_tokens

__all__ = [
    "ESTIMATE_RULE", "LLM", "Completion", "EmptyReplyError", "LLMError", "LLMRequest", "LLMSettings",
    "LLMStats", "Message", "OpenAICompatibleLLM", "Prompt", "PromptError", "PromptTooLongError",
    "ResponseCache", "context_length_of", "count_tokens_of", "cut_at_stop", "default_cache_dir",
    "estimate_tokens", "fit_count", "llm_configured", "load_prompt", "prompt_names", "read_prompt",
    "request_tokens_of", "tokens_left",
]
