"""Parsing of the LLM methods' replies (pure): decomposition, reformulation, answers and
synthesis, and mapping answer pieces back to graph entities."""

from __future__ import annotations

from kgengine.llm import load_prompt
from kgengine.rag.llm_methods import (
    Decomposition,
    SurfaceIndex,
    parse_answer_text,
    parse_decomposition,
    parse_synthesis,
    reformulated,
)
from kgengine.rag.verbalise import Surface, SurfaceForms


def test_decomposition_reasoning_then_numbered_sub_questions() -> None:
    reply = (" First find the writer of The Town.\nThen the movies by that writer.\n"
             "Sub-questions:\n1. Who wrote The Town?\n2) Which movies did that writer write?\n"
             "- What genres are those movies?\n\n")
    assert parse_decomposition(reply) == Decomposition(
        "First find the writer of The Town. Then the movies by that writer.",
        ("Who wrote The Town?", "Which movies did that writer write?", "What genres are those movies?"))


def test_decomposition_none_missing_marker_end_and_invented_examples() -> None:
    assert parse_decomposition("One fact.\nSub-questions:\nNone") == Decomposition("One fact.", ())
    assert parse_decomposition("Reasoning: no need to split") == Decomposition("no need to split", ())
    # a server that ignored the stop sequence: everything after <END> is dropped
    ignored_stop = "Two steps.\nSub-questions:\n1. A?\n2. B?\n<END>\nQuestion: x\nReasoning: y\n1. C?"
    assert parse_decomposition(ignored_stop).sub_questions == ("A?", "B?")
    runaway = "Steps.\nSUB-QUESTIONS:\n1. A?\nQuestion: who else\nSub-questions:\n1. Z?"
    assert parse_decomposition(runaway).sub_questions == ("A?",)
    many = "x\nSub-questions:\n" + "\n".join(f"{i}. Q{i}?" for i in range(1, 10)) + "\n1. Q1?"
    assert parse_decomposition(many, limit=4).sub_questions == ("Q1?", "Q2?", "Q3?", "Q4?")


def test_the_shipped_examples_parse_as_intended() -> None:
    """The in-context examples must be in the format the parser reads."""
    examples = load_prompt("rag_decompose_examples").fill().split("<END>")
    parsed = [parse_decomposition(e.split("Reasoning:", 1)[1]) for e in examples if "Reasoning:" in e]
    assert [len(p.sub_questions) for p in parsed] == [0, 2, 3]
    assert parsed[1].sub_questions[0] == "Who directed Inception?"


def test_reformulation_answer_and_synthesis() -> None:
    assert reformulated(" Which movies did Christopher Nolan direct", "orig?") == \
        "Which movies did Christopher Nolan direct?"
    assert reformulated('Rewritten question: "Who wrote Heat"', "orig?") == "Who wrote Heat?"
    original = "Which movies did that writer write?"
    assert reformulated("  \n", original) == original
    assert parse_answer_text("  Christopher Nolan \n") == "Christopher Nolan"
    assert parse_answer_text("Answer: Interstellar, Dunkirk") == "Interstellar, Dunkirk"
    assert parse_synthesis("Reasoning: Nolan directed both.\nAnswer: Interstellar, Dunkirk") == (
        "Nolan directed both.", "Interstellar, Dunkirk")
    assert parse_synthesis("Interstellar") == ("", "Interstellar")
    # the last Answer: line wins (a model that restates the sub-answers first)
    assert parse_synthesis("Reasoning: Answer: was X\nFinal answer: Y") == ("Answer: was X", "Y")


def test_surface_index_prefers_prompt_entities_then_surface_forms_then_resolver() -> None:
    labels = {"m.1": "The Matrix", "m.2": "Keanu Reeves", "m.3": "the matrix"}
    text = SurfaceForms(Surface.TEXT, labels=labels)
    index = SurfaceIndex(text, resolve=lambda piece: "m.9" if piece == "Zion" else None)
    local = index.local(["m.3"])
    assert index.lookup("Matrix", local) == "m.3"  # normalised ("the" dropped); the prompt's entity first
    assert index.lookup("keanu reeves.", {}) == "m.2"
    assert index.lookup("Zion", {}) == "m.9" and index.lookup("nobody", {}) is None
    assert index.lookup("  the ", local) is None
    private = SurfaceIndex(SurfaceForms(Surface.PRIVATE, private_ids={"Nolan": "4711"}))
    assert private.lookup("4711", {}) == "Nolan" and private.lookup("Nolan", {}) is None


# ---- what real small models send back (issue: replies parsed without crediting fragments) --------
def test_a_reply_that_copies_facts_credits_no_fragment_of_them() -> None:
    from kgengine.rag.llm_methods import reply_pieces

    pieces, notes = reply_pieces("(Inception, directed by, Christopher Nolan), "
                                 "(Inception, release year, 2010)")
    assert pieces == [] and "copied 2 fact(s)" in notes[0]
    pieces, _ = reply_pieces("(Inception, directed by, Christopher Nolan)\nChristopher Nolan")
    assert pieces == ["Christopher Nolan"]


def test_answer_text_stops_where_the_model_goes_on() -> None:
    assert parse_answer_text("Christopher Nolan\n\nQuestion: who wrote Heat?\nAnswer: Michael Mann") == \
        "Christopher Nolan"
    assert parse_answer_text("Answer: Tom Hardy\nNote: from the facts") == "Tom Hardy"
    assert parse_answer_text("Reasoning: one hop.\nAnswer: Dunkirk") == "Dunkirk"
    assert parse_answer_text("Question: who directed Heat?\nAnswer: Michael Mann") == "Michael Mann"


def test_a_fact_copied_without_its_parentheses_credits_neither_end() -> None:
    from kgengine.rag.llm_methods import reply_pieces

    facts = ["The Joneses, starred actors, David Duchovny"]
    pieces, notes = reply_pieces("The Joneses, starred actors, David Duchovny", facts)
    assert pieces == [] and "copied 1 fact(s)" in notes[0]
    pieces, _ = reply_pieces("the joneses, starred actors, david duchovny, Demi Moore", facts)
    assert pieces == ["Demi Moore"]
