"""Embedding selection (KG-RAG paper §3.5.3, KAPING): the question and the verbalised
candidate triples are embedded with the same sentence-transformers model and the top-K
triples by dot product are kept (K = 10/20/30 in the paper).

Triple vectors come from the graph's on-disk cache (:mod:`kgengine.rag.embeddings`), built
once per graph load; answering a question encodes the question text only. Fallback: a
candidate that is not in the cache (a triple not from this graph, or every candidate when
the selector was made with ``build=False`` and no cache exists) is encoded at selection time
and remembered (up to ``EXTRA_LIMIT`` of them); ``encoded_on_the_fly`` counts those triples.

Order: score descending, ties by the candidates' input order (deterministic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from kgengine.errors import KGEngineError
from kgengine.model import Question, Triple
from kgengine.progress import NO_PROGRESS, Reporter
from kgengine.rag.embeddings import TextEncoder, TripleEmbeddings, load_encoder, triple_embeddings
from kgengine.rag.verbalise import Surface, SurfaceForms, parse_surface, verbalise
from kgengine.store import KGStore

TOP_K_CHOICES = (10, 20, 30)  # the paper's K values
EXTRA_LIMIT = 100_000  # on-the-fly vectors a selector remembers (384 floats each)


class SelectionError(KGEngineError):
    pass


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first, ties by index (pure)."""
    if k < 1:
        raise SelectionError(f"top-k must be at least 1, got {k}")
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    # argpartition may split a tie at the boundary arbitrarily: keep every candidate that
    # ties the k-th score, then sort stably
    kth = np.partition(scores, len(scores) - k)[len(scores) - k]
    keep = np.flatnonzero(scores >= kth)
    return keep[np.argsort(-scores[keep], kind="stable")][:k]


class EmbeddingSelector:
    """``Selector``: the top-K candidate triples for a question by embedding dot product.

    ``encoder`` is any :class:`~kgengine.rag.embeddings.TextEncoder` (default: the
    sentence-transformers ``model``, all-MiniLM-L6-v2 unless named); ``surface`` is how
    triples are written for the model (``dataset`` ids, ``text`` labels or ``private``
    ids); ``cache_dir`` is a folder for the cache entries instead of the cache root's
    ``embeddings/`` (:func:`kgengine.artifacts.cache_root`). The cache is loaded (or,
    with ``build``, built with ``progress``) when the selector is made, for the graph's load
    at that moment; a long-lived selector calls :meth:`refresh` to follow a reload."""

    def __init__(
        self,
        store: KGStore,
        graph: str,
        *,
        encoder: TextEncoder | None = None,
        model: str | None = None,
        surface: str | Surface = Surface.DATASET,
        cache_dir: str | Path | None = None,
        build: bool = True,
        progress: Reporter = NO_PROGRESS,
    ) -> None:
        self.store, self.graph = store, graph
        self.encoder = encoder if encoder is not None else load_encoder(model)
        self._kind, self._cache_dir, self._build = parse_surface(surface), cache_dir, build
        self.encoded_on_the_fly = 0
        self.refresh(progress)

    def refresh(self, progress: Reporter = NO_PROGRESS) -> None:
        """Follow the graph's current load: surface forms read again and the cache entry of
        that load used (built first with ``build``); a no-op when the graph is unchanged."""
        stamp = self.store.require_graph(self.graph, complete=True)
        if getattr(self, "_stamp", None) == stamp:
            return
        self.surface = SurfaceForms.from_store(self.store, self.graph, self._kind)
        self.cache: TripleEmbeddings | None = triple_embeddings(
            self.store, self.graph, self.encoder, self.surface,
            Path(self._cache_dir) if self._cache_dir else None, build=self._build, progress=progress,
        )
        self._extra: dict[Triple, np.ndarray] = {}  # on-the-fly vectors of uncached triples
        self._stamp = stamp

    def verbalise(self, triple: Triple) -> str:
        """The triple as the selector writes it (the same text can go in a prompt)."""
        return verbalise(triple, self.surface)

    def select(self, question: Question, triples: Sequence[Triple], k: int) -> list[Triple]:
        return [t for t, _ in self.scored(question.text, triples, k)]

    def scored(self, question: str, triples: Sequence[Triple], k: int) -> list[tuple[Triple, float]]:
        """The top ``k`` candidates with their dot-product scores, best first (duplicates
        in ``triples`` count once)."""
        if k < 1:
            raise SelectionError(f"top-k must be at least 1, got {k}")
        candidates = list(dict.fromkeys(triples))
        if not candidates:
            return []
        vectors = self._vectors(candidates)
        query = self.encoder.encode([question])[0]
        scores = vectors @ query
        return [(candidates[i], float(scores[i])) for i in top_k(scores, k)]

    def _vectors(self, candidates: list[Triple]) -> np.ndarray:
        if self.cache is not None:
            rows, missing = self.cache.rows(candidates)
        else:
            rows, missing = np.full(len(candidates), -1, dtype=np.int64), list(range(len(candidates)))
        unknown = [candidates[i] for i in missing if candidates[i] not in self._extra]
        if unknown:
            if len(self._extra) + len(unknown) > EXTRA_LIMIT:  # bounded memory when uncached
                self._extra.clear()
                unknown = [candidates[i] for i in missing]
            encoded = self.encoder.encode([self.verbalise(t) for t in unknown])
            self._extra.update(zip(unknown, encoded, strict=True))
            self.encoded_on_the_fly += len(unknown)
        if not missing:
            # fancy indexing of the memory map reads only these rows
            return np.asarray(self.cache.vectors[rows])  # type: ignore[union-attr]
        dimension = next(iter(self._extra.values())).shape[0]
        out = np.empty((len(candidates), dimension), dtype=np.float32)
        present = np.flatnonzero(rows >= 0)
        if len(present):
            out[present] = self.cache.vectors[rows[present]]  # type: ignore[union-attr]
        for i in missing:
            out[i] = self._extra[candidates[i]]
        return out
