"""An on-disk cache of responses (chat completions now, embeddings later): a namespace and a
JSON-able key map to a JSON payload.

One file per entry, ``DIR/NAMESPACE/ab/abcdef….json``, named by the SHA-256 of the
canonical JSON of (namespace, key) and holding the key itself (so an entry can be read and
checked by hand). Writes go to a temporary file in the same folder and are renamed into
place, so a reader (another thread, another process, a crash) never sees half an entry.

Chat completions live under the ``chat`` namespace, keyed by the model and the full request
(:meth:`~kgengine.llm.request.LLMRequest.cache_key`): :func:`cached_completion` and
:func:`store_completion`."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from kgengine.artifacts import cache_root
from kgengine.errors import KGEngineError
from kgengine.fsutil import write_text_atomically
from kgengine.llm.request import Completion, LLMRequest

_NAMESPACE = re.compile(r"[A-Za-z0-9_.-]+\Z")
CHAT_NAMESPACE = "chat"


def default_cache_dir() -> Path:
    """Where responses are cached unless told otherwise: the cache root's ``llm/`` folder."""
    return cache_root("llm")


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, non-ASCII kept: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ResponseCache:
    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    @staticmethod
    def digest(namespace: str, key: Any) -> str:
        return hashlib.sha256(canonical_json([namespace, key]).encode("utf-8")).hexdigest()

    def path(self, namespace: str, key: Any) -> Path:
        if not _NAMESPACE.match(namespace):
            raise KGEngineError(f"cache namespace {namespace!r}: use letters, digits, '_', '-', '.'")
        digest = self.digest(namespace, key)
        return self.directory / namespace / digest[:2] / f"{digest}.json"

    def get(self, namespace: str, key: Any) -> Any | None:
        """The payload stored for ``key``, or None (absent, unreadable, or another key)."""
        path = self.path(namespace, key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        # JSON round trip makes tuples lists: compare canonical texts, not Python values
        if not isinstance(entry, dict) or canonical_json(entry.get("key")) != canonical_json(key):
            return None
        return entry.get("payload")

    def put(self, namespace: str, key: Any, payload: Any) -> None:
        path = self.path(namespace, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = canonical_json({"namespace": namespace, "key": key, "payload": payload})
        write_text_atomically(path, text)

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.rglob("*.json"))


def cached_completion(cache: ResponseCache, model: str, request: LLMRequest) -> Completion | None:
    """The reply stored for ``request`` to ``model`` (marked ``cached``), or None."""
    payload = cache.get(CHAT_NAMESPACE, request.cache_key(model))
    if isinstance(payload, str):  # entries written before completions had metadata
        return Completion(payload, cached=True)
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        known = {f.name for f in fields(Completion)}
        return Completion(**{k: v for k, v in payload.items() if k in known and k != "cached"}, cached=True)
    return None


def store_completion(cache: ResponseCache, model: str, request: LLMRequest, completion: Completion) -> None:
    """Keep ``completion`` as the reply to ``request``: every field but ``cached``."""
    payload = {f.name: getattr(completion, f.name) for f in fields(completion) if f.name != "cached"}
    cache.put(CHAT_NAMESPACE, request.cache_key(model), payload)
