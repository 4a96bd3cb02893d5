"""docs/extending.md's examples run as written: its method, question set, loader and command
are executed from the page, registered, and used; its table names each kind's registry and
entry-point group as the code has them, and every entry-point block names a registry's group
(a page that drifted from the code fails)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.toy_kg import MOVIES
from kgengine.cli import COMMANDS
from kgengine.errors import KGEngineError
from kgengine.loaders import LOADERS, read_dataset
from kgengine.model import Question
from kgengine.oxigraph.store import OxigraphStore
from kgengine.questions import QUESTION_READERS, load_question_set
from kgengine.rag.methods import METHODS, build_answerer, register_method, unregister_method
from kgengine.registry import Registry, load_reference
from kgengine.store import BACKENDS, NamedQueryStore, backend_class

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
    QUESTION_READERS.register("csvqa", module.READER)
    try:  # registered, the set is found by `--questions` (load_question_set) like a built-in's
        assert load_question_set(str(path)).questions == qset.questions
    finally:
        QUESTION_READERS.unregister("csvqa")


def test_the_loader_example_reads_a_csv(tmp_path: Path) -> None:
    module = example("# my_loaders/csvkg.py")
    path = tmp_path / "kg.csv"
    path.write_text("a,r,b\nb,r,c\n", encoding="utf-8")
    dataset = module.read_csvkg(path)
    assert list(dataset.triples) == [("a", "r", "b"), ("b", "r", "c")]
    LOADERS.register("csvkg", module.read_csvkg)
    try:  # registered: read by name, like `kgengine load csvkg --path FILE`
        assert list(read_dataset("csvkg", path).triples) == list(dataset.triples)
        with pytest.raises(KGEngineError, match="has no option colour"):
            read_dataset("csvkg", path, colour="red")
    finally:
        LOADERS.unregister("csvkg")


def test_the_command_example_is_listed_and_runs() -> None:
    module = example("# my_commands/hello.py")
    COMMANDS.register("hello", module.hello)
    try:
        listed = run_cli("--help")
        assert "hello" in listed.output and "Greet NAME (an example command)." in listed.output
        assert run_cli("hello", "you").output == "hello you\n"
    finally:
        COMMANDS.unregister("hello")


def test_a_registered_backend_is_picked_by_its_scheme() -> None:
    class MyStore(NamedQueryStore):
        schemes = ("mystore",)

    BACKENDS.register("mystore", MyStore)
    try:
        assert backend_class("mystore://somewhere") is MyStore
    finally:
        BACKENDS.unregister("mystore")


def test_the_table_and_the_entry_point_blocks_name_the_registries_as_the_code_has_them() -> None:
    text = PAGE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| [^|]+ \| `(kgengine\.[\w.]+)` \| `([\w.]+)` \|", text, re.MULTILINE)
    registries: dict[str, Registry[object]] = {}
    for path, group in rows:
        module, _, name = path.rpartition(".")
        registry = load_reference(f"{module}:{name}")
        assert isinstance(registry, Registry), path
        assert registry.group == group, path
        registries[group] = registry
    assert {id(r) for r in registries.values()} == {id(r) for r in (METHODS, QUESTION_READERS, LOADERS,
                                                                    BACKENDS, COMMANDS)}
    blocks = re.findall(r'```toml\n\[project\.entry-points\."([\w.]+)"\]\n[\w-]+ = "([\w.]+:[\w.]+)"\n```',
                        text)
    assert {group for group, _ in blocks} == set(registries)  # an example for every kind
