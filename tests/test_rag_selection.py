"""Embedding selection (kgengine.rag.selection) with the real all-MiniLM-L6-v2, and the
per-graph triple embedding cache (kgengine.rag.embeddings): reuse without re-encoding the
KG, invalidation on reload, atomic builds."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers.toy_kg import triples
from kgengine.artifacts import cache_root
from kgengine.model import Question, Triple
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag import embeddings, selection
from kgengine.rag.embeddings import (
    DEFAULT_MODEL,
    EmbeddingError,
    SentenceTransformerEncoder,
    load_encoder,
)
from kgengine.rag.selection import EmbeddingSelector, SelectionError, top_k
from kgengine.rag.verbalise import verbalise

T = Triple
FILMS = [*triples("""
Inception | directed_by | Christopher Nolan
Inception | starred_actors | Leonardo DiCaprio
Inception | release_year | 2010
Inception | has_genre | Science Fiction
Inception | in_language | English
Amelie | directed_by | Jean-Pierre Jeunet
Amelie | in_language | French
Amelie | release_year | 2001
Amelie | has_genre | Romance
The Town | directed_by | Ben Affleck
The Town | release_year | 2010
The Town | written_by | Peter Craig
Ben Affleck | born_in | Berkeley
Leonardo DiCaprio | born_in | Los Angeles
"""),
]


class CountingEncoder:
    """The real encoder, recording how many texts each call encodes."""

    def __init__(self, inner: SentenceTransformerEncoder) -> None:
        self.inner, self.model_id, self.calls = inner, inner.model_id, []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return self.inner.encode(texts)


@pytest.fixture(scope="module")
def model() -> SentenceTransformerEncoder:
    return load_encoder()


@pytest.fixture
def films(tmp_path: Path) -> OxigraphStore:
    store = OxigraphStore(str(tmp_path / "store"))
    store.load("films", FILMS, dataset="tsv")
    yield store
    store.close()


def test_default_model_is_the_packaged_minilm(model: SentenceTransformerEncoder) -> None:
    assert model.model_id == DEFAULT_MODEL and model.dimension == 384
    vectors = model.encode(["(Inception, directed by, Christopher Nolan)", "who directed Inception"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32


@pytest.mark.parametrize(("question", "expected"), [
    ("who directed Inception?", T("Inception", "directed_by", "Christopher Nolan")),
    ("what language is Amelie in?", T("Amelie", "in_language", "French")),
    ("which year was The Town released?", T("The Town", "release_year", "2010")),
    ("where was Ben Affleck born?", T("Ben Affleck", "born_in", "Berkeley")),
])
def test_selection_picks_the_triple_the_question_asks_for(
    films: OxigraphStore, model: SentenceTransformerEncoder, tmp_path: Path, question: str, expected: Triple
) -> None:
    selector = EmbeddingSelector(films, "films", encoder=model, cache_dir=tmp_path / "cache")
    assert selector.select(Question(question), FILMS, 1) == [expected]
    scored = selector.scored(question, FILMS, 3)
    assert scored[0] == (expected, pytest.approx(float(model.encode([verbalise(expected)])[0]
                                                       @ model.encode([question])[0]), abs=1e-4))
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)


def test_top_k_of_a_candidate_subset_and_k_larger_than_the_candidates(
    films: OxigraphStore, model: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    selector = EmbeddingSelector(films, "films", encoder=model, cache_dir=tmp_path / "cache")
    amelie = [t for t in FILMS if t.head == "Amelie"]
    picked = selector.select(Question("what genre is Amelie?"), amelie, 1)
    assert picked == [T("Amelie", "has_genre", "Romance")]
    everything = selector.select(Question("what genre is Amelie?"), amelie + amelie, 30)
    assert sorted(everything) == sorted(amelie)  # duplicates count once
    assert selector.select(Question("anything"), [], 10) == []
    with pytest.raises(SelectionError, match="at least 1"):
        selector.select(Question("anything"), amelie, 0)


def test_top_k_order_and_ties() -> None:
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.5, 0.2], dtype=np.float32)
    assert top_k(scores, 1).tolist() == [1]
    assert top_k(scores, 3).tolist() == [1, 3, 2]  # ties by input order
    assert top_k(scores, 4).tolist() == [1, 3, 2, 4]
    assert top_k(scores, 10).tolist() == [1, 3, 2, 4, 5, 0]


def test_the_cache_is_reused_without_encoding_the_graph(
    films: OxigraphStore, model: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = CountingEncoder(model)
    EmbeddingSelector(films, "films", encoder=first, cache_dir=cache)
    assert sum(first.calls) == len(FILMS)  # the build encodes every triple once
    entries = [p for p in cache.iterdir()]
    assert len(entries) == 1 and sorted(p.name for p in entries[0].iterdir()) == [
        "meta.json", "triples.json", "vectors.npy"]

    second = CountingEncoder(model)
    selector = EmbeddingSelector(films, "films", encoder=second, cache_dir=cache)
    assert second.calls == []  # loaded from disk
    assert isinstance(selector.cache.vectors, np.memmap)
    picked = selector.select(Question("who directed Inception?"), FILMS, 2)
    assert second.calls == [1]  # the question only
    assert picked[0] == T("Inception", "directed_by", "Christopher Nolan")
    # the rows on disk are the encodings of their triples
    for triple in (FILMS[0], FILMS[7], FILMS[-1]):
        row = selector.cache.vectors[selector.cache.index[triple]]
        assert np.allclose(row, model.encode([verbalise(triple)])[0], atol=1e-5)
    # another surface form is another entry
    EmbeddingSelector(films, "films", encoder=second, cache_dir=cache, surface="text")
    assert len(list(cache.iterdir())) == 2


def test_a_triple_not_in_the_cache_is_encoded_on_the_fly(
    films: OxigraphStore, model: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    encoder = CountingEncoder(model)
    selector = EmbeddingSelector(films, "films", encoder=encoder, cache_dir=tmp_path / "cache")
    encoder.calls.clear()
    outsider = T("Heat", "directed_by", "Michael Mann")
    assert selector.select(Question("who directed Heat?"), [*FILMS, outsider], 1) == [outsider]
    assert encoder.calls == [1, 1] and selector.encoded_on_the_fly == 1  # the outsider, the question
    selector.select(Question("who directed Heat?"), [*FILMS, outsider], 1)
    assert encoder.calls == [1, 1, 1]  # remembered: the question only


def test_without_a_cache_and_build_off_candidates_are_encoded(
    films: OxigraphStore, model: SentenceTransformerEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = CountingEncoder(model)
    selector = EmbeddingSelector(films, "films", encoder=encoder, cache_dir=tmp_path / "cache", build=False)
    assert selector.cache is None and encoder.calls == []
    assert selector.select(Question("who directed Inception?"), FILMS[:5], 1) == [FILMS[0]]
    assert encoder.calls == [5, 1] and not (tmp_path / "cache").exists()
    # remembered vectors are bounded: past the limit they are dropped, and answers stay the same
    monkeypatch.setattr(selection, "EXTRA_LIMIT", 6)
    encoder.calls.clear()
    assert selector.select(Question("who directed Amelie?"), FILMS[3:7], 1) == [FILMS[5]]
    assert encoder.calls == [4, 1] and len(selector._extra) == 4
    assert selector.select(Question("who directed Inception?"), FILMS[:5], 1) == [FILMS[0]]
    assert selector.encoded_on_the_fly == 5 + 4 + 5


def test_reloading_the_graph_invalidates_the_cache(
    films: OxigraphStore, model: SentenceTransformerEncoder, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    EmbeddingSelector(films, "films", encoder=model, cache_dir=cache)
    old = films.graph_info("films").loaded_at
    (old_entry,) = cache.iterdir()
    while films.graph_info("films").loaded_at == old:  # the load stamp has 1 s resolution
        time.sleep(0.25)
        films.load("films", FILMS, dataset="tsv", replace=True)
    encoder = CountingEncoder(model)
    EmbeddingSelector(films, "films", encoder=encoder, cache_dir=cache)
    assert sum(encoder.calls) == len(FILMS)  # rebuilt
    (new_entry,) = cache.iterdir()  # and the entry of the old load is gone
    assert new_entry != old_entry
    # a reload with other triples, followed by a live selector: rebuilt with them
    selector = EmbeddingSelector(films, "films", encoder=encoder, cache_dir=cache)
    encoder.calls.clear()
    selector.refresh()
    assert encoder.calls == []  # same load: nothing to do
    films.load("films", FILMS[:4], dataset="tsv", replace=True)
    selector.refresh()
    assert encoder.calls == [4] and sorted(selector.cache.triples) == sorted(FILMS[:4])
    assert selector.select(Question("who directed Inception?"), FILMS[:4], 1) == [FILMS[0]]
    assert selector.encoded_on_the_fly == 0


def test_an_interrupted_build_leaves_no_entry(
    films: OxigraphStore, model: SentenceTransformerEncoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"

    class Interrupted(CountingEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            if self.calls:
                raise KeyboardInterrupt
            return super().encode(texts)

    monkeypatch.setattr(embeddings, "ENCODE_BATCH", 3)
    with pytest.raises(KeyboardInterrupt):
        EmbeddingSelector(films, "films", encoder=Interrupted(model), cache_dir=cache)
    assert list(cache.iterdir()) == []
    # a build killed outright leaves its temporary folder: the next build removes it
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    leftover = cache / f".entry.{dead}.x1.tmp"
    leftover.mkdir()
    (leftover / "vectors.npy").write_bytes(b"half")
    selector = EmbeddingSelector(films, "films", encoder=model, cache_dir=cache)
    assert [p.name for p in cache.iterdir()] == [selector.cache.path.name]


def test_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KGENGINE_CACHE", str(tmp_path / "kg"))
    assert cache_root("embeddings") == tmp_path / "kg" / "embeddings"
    monkeypatch.delenv("KGENGINE_CACHE")
    assert cache_root("embeddings").parts[-2:] == ("kgengine", "embeddings")


def test_missing_sentence_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbeddingError, match=r"pip install 'kgengine\[rag\]'"):
        SentenceTransformerEncoder()


def test_a_model_that_cannot_be_loaded(tmp_path: Path) -> None:
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(EmbeddingError, match="cannot load embedding model"):
        SentenceTransformerEncoder(str(tmp_path / "not-a-model"))
