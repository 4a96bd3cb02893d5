"""Shared LLM parts for every feature (BRINK question writing, the KG-RAG answerers):

- :class:`LLM` — the protocol: ``complete(LLMRequest) -> str``;
- :class:`OpenAICompatibleLLM` — on the ``openai`` client, any OpenAI-compatible endpoint,
  settings from arguments / environment / config file (:class:`LLMSettings`), retries with
  backoff, timeouts, a :class:`ResponseCache` keyed by the full request;
- prompts as files: :func:`load_prompt` (``prompts/NAME.txt``) and :meth:`Prompt.fill`."""

from kgengine.llm.cache import ResponseCache, default_cache_dir
from kgengine.llm.client import (
    LLM,
    LLMError,
    LLMRequest,
    LLMSettings,
    LLMStats,
    Message,
    OpenAICompatibleLLM,
    cut_at_stop,
    llm_configured,
)
from kgengine.llm.prompt import Prompt, PromptError, load_prompt, prompt_names, read_prompt

__all__ = [
    "LLM", "LLMError", "LLMRequest", "LLMSettings", "LLMStats", "Message", "OpenAICompatibleLLM",
    "Prompt", "PromptError", "ResponseCache", "cut_at_stop", "default_cache_dir", "llm_configured",
    "load_prompt", "prompt_names", "read_prompt",
]
