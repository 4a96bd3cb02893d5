"""docs/extending.md's examples run as written: its method, question set and loader are
executed from the page, registered, and used (a page that drifted from the code fails)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

from helpers.toy_kg import MOVIES
from kgengine.model import Question
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag.methods import build_answerer, register_method, unregister_method

PAGE = Path(__file__).resolve().parent.parent / "docs" / "extending.md"


def example(first_line: str) -> types.ModuleType:
    """The page's Python block starting with ``first_line``, executed as a module."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    (code,) = [b for b in blocks if b.startswith(first_line)]
    module = types.ModuleType(f"docs_example_{abs(hash(first_line))}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(code, str(PAGE), "exec"), module.__dict__)  # noqa: S102 - our own documentation
    return module


def test_the_method_example_answers_with_evidence(tmp_path: Path) -> None:
    module = example("# my_methods/nearest.py")
    with OxigraphStore(str(tmp_path / "store")) as store:
        store.load("movies", MOVIES, dataset="tsv")
        register_method("neighbours", module.NEIGHBOURS)
        try:
            answer = build_answerer(store, "movies", "neighbours", options={"limit": "2"}).answer(
                Question("what about [Inception]", "Inception"))
        finally:
            unregister_method("neighbours")
    expected = sorted(t for t in MOVIES if t.head == "Inception")[:2]
    assert [a.id for a in answer.answers] == [t.tail for t in expected]
    assert [e.path for a in answer.answers for e in a.evidence] == [(tuple(t),) for t in expected]
    assert answer.timings["graph_ms"] >= 0 and answer.timings["total_ms"] > 0


def test_the_question_set_example_reads_a_csv(tmp_path: Path) -> None:
    module = example("# my_sets/csvqa.py")
    path = tmp_path / "set.csv"
    path.write_text("id,question,topic,answers,hard\nq1,who directed [Heat],Heat,Mann|Scott,Mann\n",
                    encoding="utf-8")
    assert module.READER.matches(str(path))
    qset = module.READER.read(str(path), None)
    (record,) = qset.questions
    assert record.question == Question("who directed [Heat]", "Heat")
    assert record.answers == ("Mann", "Scott") and record.hard_answer == "Mann"
    assert qset.kind.metric == "brink"


def test_the_loader_example_reads_a_csv(tmp_path: Path) -> None:
    module = example("# loaders/csvkg.py")
    path = tmp_path / "kg.csv"
    path.write_text("a,r,b\nb,r,c\n", encoding="utf-8")
    dataset = module.read_csvkg(path)
    assert list(dataset.triples) == [("a", "r", "b"), ("b", "r", "c")]
