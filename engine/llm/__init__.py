"""Shared LLM parts for every feature (BRINK question writing, the KG-RAG answerers):

- :mod:`~kgengine.llm.protocol` — :class:`LLM` (``complete(LLMRequest) -> str``) and the
  optional capabilities :class:`ContextWindow`, :class:`TokenCounter`, :class:`UsageTracking`;
  :mod:`~kgengine.llm.budget` sizes prompts for any LLM (``tokens_left``, ``fit_count``);
- :mod:`~kgengine.llm.request` — :class:`LLMRequest`, :class:`Completion`;
- :mod:`~kgengine.llm.client` — :class:`OpenAICompatibleLLM`, any OpenAI-compatible endpoint,
  on its parts: :mod:`~kgengine.llm.settings` (:class:`LLMSettings`: option > environment >
  config file > default), :mod:`~kgengine.llm.transport` (plain and streamed requests),
  :mod:`~kgengine.llm.retry` (backoff), :mod:`~kgengine.llm.cache` (:class:`ResponseCache`,
  keyed by the full request), :mod:`~kgengine.llm.usage` (:class:`LLMStats`),
  :mod:`~kgengine.llm.probes` (the server's context length and tokenizer),
  :mod:`~kgengine.llm.errors` (failures in one line), :mod:`~kgengine.llm.replies` (stop
  sequences, repetition loops, the token estimate);
- :mod:`kgengine.llm.local` — the packaged local model (the ``local-llm`` extra): ``kgengine
  llm serve`` and :func:`~kgengine.llm.local.local_endpoint` for a run with no endpoint;
- prompts as files: :func:`load_prompt` (``prompts/NAME.txt``) and :meth:`Prompt.fill`."""

from kgengine.llm.budget import context_length_of, count_tokens_of, fit_count, request_tokens_of, tokens_left
from kgengine.llm.cache import ResponseCache, default_cache_dir
from kgengine.llm.client import OpenAICompatibleLLM
from kgengine.llm.errors import EmptyReplyError, LLMError, PromptTooLongError
from kgengine.llm.prompt import Prompt, PromptError, load_prompt, prompt_names, read_prompt
from kgengine.llm.protocol import LLM, ContextWindow, TokenCounter, UsageTracking
from kgengine.llm.replies import ESTIMATE_RULE, cut_at_stop, estimate_tokens
from kgengine.llm.request import Completion, LLMRequest, Message
from kgengine.llm.settings import LLMSettings, llm_configured
from kgengine.llm.usage import LLMStats

__all__ = [
    "ESTIMATE_RULE", "LLM", "Completion", "ContextWindow", "EmptyReplyError", "LLMError", "LLMRequest",
    "LLMSettings", "LLMStats", "Message", "OpenAICompatibleLLM", "Prompt", "PromptError",
    "PromptTooLongError", "ResponseCache", "TokenCounter", "UsageTracking", "context_length_of",
    "count_tokens_of", "cut_at_stop", "default_cache_dir", "estimate_tokens", "fit_count",
    "llm_configured", "load_prompt", "prompt_names", "read_prompt", "request_tokens_of", "tokens_left",
]
