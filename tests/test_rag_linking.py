"""Entity linking and the entity search queries on a real Oxigraph store: ids, private ids,
labels (exact, then case-insensitive), [brackets], the longest mention, and the error with
close matches for an entity that is not in the graph."""

from __future__ import annotations

import pytest
from kgengine.model import Question, Triple
from kgengine.rag.linking.entities import EntityNotFoundError, GraphEntityLinker, search_entities

TRIPLES = [
    Triple("Q60", "located_in", "Q30"),
    Triple("Q1384", "located_in", "Q30"),
    Triple("Q100", "located_in", "Q1384"),
    Triple("m.york", "located_in", "m.uk"),
]
LABELS = [("Q60", "New York City"), ("Q1384", "New York"), ("Q30", "United States"),
          ("m.york", "York"), ("m.uk", "United Kingdom"), ("Q100", "Albany")]


@pytest.fixture
def linker(oxigraph_store):
    oxigraph_store.load("places", TRIPLES, dataset="places", labels=LABELS)
    return GraphEntityLinker(oxigraph_store, "places")


def test_resolve_by_id_private_id_and_label(linker, oxigraph_store) -> None:
    private = oxigraph_store.private_ids("places")
    assert linker.resolve("Q60").id == "Q60" and linker.resolve("Q60").match == "id"
    assert linker.resolve(private["Q30"]).id == "Q30"
    assert linker.resolve(private["Q30"]).match == "private id"
    assert linker.resolve(private["Q30"].upper()).id == "Q30"  # private ids case-blind
    assert linker.resolve("New York").id == "Q1384"  # the exact label, not the longer one
    match = linker.resolve("united kingdom")
    assert (match.id, match.match) == ("m.uk", "label (case-insensitive)")


def test_unknown_entity_names_close_matches(linker) -> None:
    with pytest.raises(EntityNotFoundError) as error:
        linker.resolve("New Yrok")
    message = str(error.value)
    assert "no entity 'New Yrok' in graph 'places'" in message
    assert "'New York' (Q1384)" in message
    # a prefix is a suggestion, never a link
    with pytest.raises(EntityNotFoundError, match="Albany"):
        linker.resolve("Alba")


def test_search_entities_ranks_exact_before_prefix(linker, oxigraph_store) -> None:
    found = search_entities(oxigraph_store, "places", "new york")
    assert [(m.id, m.match) for m in found] == [("Q1384", "label (case-insensitive)"),
                                                ("Q60", "label prefix")]
    assert search_entities(oxigraph_store, "places", "Q100")[0].label == "Albany"
    assert search_entities(oxigraph_store, "places", "nothing like it") == []


def test_link_from_topic_entity_brackets_and_longest_mention(linker) -> None:
    # the given topic (a label) and how the question names it
    linked = linker.link_mention(Question("Where is new york city located?", "New York City"))
    assert (linked.id, linked.mention) == ("Q60", "New York City")
    # a MetaQA bracket
    linked = linker.link_mention(Question("what is [York] located in"))
    assert (linked.id, linked.mention) == ("m.york", "York")
    # the longest name in the text: New York City, not New York or York
    linked = linker.link_mention(Question("Which country is New York City in?"))
    assert (linked.id, linked.mention) == ("Q60", "New York City")
    linked = linker.link_mention(Question("Where is Q100?"))  # an id in the text
    assert linked.id == "Q100" and linked.how == "text match (id)"
    assert linker.link(Question("is albany big", None)) == "Q100"


def test_link_without_any_entity_is_a_clear_error(linker) -> None:
    with pytest.raises(EntityNotFoundError, match="no entity of graph 'places' is named"):
        linker.link(Question("Where is Atlantis?"))
    with pytest.raises(EntityNotFoundError, match="close matches"):
        linker.link(Question("what is [Yorke] located in"))


def test_entity_command_prints_matches_degrees_and_suggestions(tmp_path) -> None:
    import json

    from click.testing import CliRunner
    from kgengine.cli import main
    from kgengine.oxigraph.store import OxigraphStore

    location = str(tmp_path / "cli-store")
    with OxigraphStore(location) as store:  # closed: the command opens the store itself
        store.load("places", TRIPLES, dataset="places", labels=LABELS)
        private = store.private_ids("places")

    def entity(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, ["entity", *args, "--graph", "places", "--store", location])
        return result.exit_code, result.output

    code, out = entity("new york", "--json")
    assert code == 0, out
    found = json.loads(out)
    assert found["suggestions"] is False
    assert [(e["id"], e["match"], e["degree"]) for e in found["entities"]] == [
        ("Q1384", "label (case-insensitive)", 2), ("Q60", "label prefix", 1)]
    assert found["entities"][0]["private_id"] == private["Q1384"]
    close = json.loads(entity("Albanny", "--json")[1])
    assert close["suggestions"] is True and close["entities"][0]["id"] == "Q100"
    assert close["entities"][0]["label"] == "Albany" and close["entities"][0]["degree"] == 1
    code, out = entity("Q30")
    assert code == 0 and "United States" in out and "│ 2 " in out  # from Q60 and Q1384
    code, out = entity("qqqqqq")
    assert code == 1 and "nor anything close" in out


def test_a_name_in_the_text_wins_over_a_longer_question_word(oxigraph_store) -> None:
    from kgengine.model import Triple
    from kgengine.rag.linking.entities import GraphEntityLinker

    # MetaQA-style: a tag entity 'director' beside the film; the question names both
    oxigraph_store.load("films", [Triple("Kismet", "directed_by", "William Dieterle"),
                                  Triple("Kismet", "has_tags", "director")], dataset="films",
                        labels=[("Kismet", "Kismet"), ("director", "director")])
    linked = GraphEntityLinker(oxigraph_store, "films").link_mention(
        Question("who is the director of the film Kismet?"))
    assert linked.id == "Kismet" and linked.mention == "Kismet"
