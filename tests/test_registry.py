"""kgengine.registry.Registry, the one registry every kind of extension uses: built-ins
imported only when used, entry points scanned once per process, run-time registration, a
type check of what loads, and one clear line for a broken plugin or an unknown name. Then
the same through the registries kgengine has (the CLI's commands above all)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from typing import Any

import click
import pytest
from helpers.cli import run_cli
from kgengine.cli import COMMANDS
from kgengine.errors import KGEngineError
from kgengine.loaders import LOADERS
from kgengine.questions import QUESTION_READERS
from kgengine.rag.methods import METHODS
from kgengine.registry import Registry, instance_of
from kgengine.store import BACKENDS

GROUP = "kgengine.test_things"
BROKEN = "no_such_package.module:THING"


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[EntryPoint]]:
    """The entry points installed packages declare (what importlib.metadata would find)."""
    declared: list[EntryPoint] = []
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [ep for ep in declared if ep.group == group])
    yield declared
    declared.clear()


def things() -> Registry[int]:
    return Registry("thing", GROUP, {"answer": "kgengine.registry:__name__"}, accepts=instance_of(int),
                    expected="an int")


def test_builtins_are_imported_only_when_used() -> None:
    code = ("import sys\nfrom kgengine.loaders import LOADERS\nfrom kgengine.store import BACKENDS\n"
            "names = LOADERS.names() + BACKENDS.names()\n"
            "prefixes = ('kgengine.loaders.', 'kgengine.oxigraph', 'kgengine.neo4j')\n"
            "print(sorted(m for m in sys.modules if m.startswith(prefixes)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['kgengine.loaders.base']"  # the Dataset type, no reader


def test_names_lists_builtins_then_plugins_then_run_time_ones(plugins: list[EntryPoint]) -> None:
    plugins += [EntryPoint("zeta", "math:pi", GROUP), EntryPoint("alpha", "math:e", GROUP),
                EntryPoint("tau", BROKEN, GROUP)]  # a built-in's name cannot be taken
    registry = Registry("number", GROUP, {"tau": "math:tau"}, accepts=instance_of(float), expected="a float")
    registry.register("one", 1.0)
    assert registry.names() == ["tau", "alpha", "zeta", "one"]
    assert "alpha" in registry and "nope" not in registry and len(registry) == 4
    assert registry.get("alpha") == pytest.approx(2.718, abs=1e-3)
    registry.names(), registry.get("zeta")
    assert sum(1 for _ in registry.plugins()) == 2


def test_entry_points_are_scanned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[str] = []
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: scans.append(group) or [])
    registry = things()
    for _ in range(3):
        registry.names()
        assert "answer" in registry and "other" not in registry
    assert scans == [GROUP]


def test_a_broken_plugin_is_one_line_naming_the_entry_point_and_group(plugins: list[EntryPoint]) -> None:
    plugins.append(EntryPoint("broken", BROKEN, GROUP))
    with pytest.raises(KGEngineError) as failed:
        things().get("broken")
    message = str(failed.value)
    assert "\n" not in message and failed.value.__cause__ is None and failed.value.__suppress_context__
    assert "thing 'broken'" in message and BROKEN in message and GROUP in message
    assert "ModuleNotFoundError" in message


def test_what_loads_must_be_of_the_kind(plugins: list[EntryPoint]) -> None:
    plugins.append(EntryPoint("pi", "math:pi", GROUP))
    with pytest.raises(KGEngineError, match=rf"thing 'pi' \(entry point pi = 'math:pi' in group {GROUP}\): "
                                            r"3\.14.* is not an int"):
        things().get("pi")
    with pytest.raises(KGEngineError, match="is not an int"):
        things().get("answer")  # a built-in naming the wrong thing: the same line
    with pytest.raises(KGEngineError, match="thing 'half': 0.5 is not an int"):
        things().register("half", 0.5)  # type: ignore[arg-type]


def test_unknown_names_list_the_valid_ones_and_built_ins_stay() -> None:
    registry = things()
    registry.register("seven", 7)
    with pytest.raises(KGEngineError, match=r"unknown thing 'eight' \(choose from answer, seven\)"):
        registry.get("eight")
    with pytest.raises(KGEngineError, match="thing 'answer' is built in"):
        registry.register("answer", 42)
    assert registry.get("seven") == 7
    registry.unregister("seven")
    registry.unregister("answer")  # only run-time names go
    assert registry.names() == ["answer"]


@pytest.mark.parametrize(("registry", "group"), [
    (COMMANDS, "kgengine.commands"), (BACKENDS, "kgengine.backends"), (LOADERS, "kgengine.loaders"),
    (METHODS, "kgengine.methods"), (QUESTION_READERS, "kgengine.question_sets")])
def test_every_kind_has_its_entry_point_group(registry: Registry[Any], group: str) -> None:
    assert registry.group == group
    assert all(isinstance(name, str) for name in registry.names())
    for name in registry.names():  # every built-in loads and is of its kind
        registry.get(name)


def test_a_plugin_command_is_listed_and_runs_and_a_broken_one_is_one_line(plugins: list[EntryPoint],
                                                                          monkeypatch: pytest.MonkeyPatch
                                                                          ) -> None:
    @click.command()
    def hello() -> None:
        """Say hello (a plugin's command)."""
        click.echo("hello")

    module = type(sys)("kgengine_test_plugin")
    module.hello = hello  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    plugins += [EntryPoint("hello", "kgengine_test_plugin:hello", "kgengine.commands"),
                EntryPoint("broken", BROKEN, "kgengine.commands")]
    monkeypatch.setattr(COMMANDS, "_plugins", None)  # scan this test's entry points
    monkeypatch.setattr(COMMANDS, "_loaded", {})
    listed = run_cli("--help")
    assert listed.exit_code == 0, listed.output
    assert "Say hello (a plugin's command)." in listed.output
    assert "broken" in listed.output and "unavailable" in listed.output
    assert run_cli("hello").output == "hello\n"
    broken = run_cli("broken")
    assert broken.exit_code == 1 and "Traceback" not in broken.output
    (line,) = broken.output.strip().splitlines()
    assert line.startswith("Error: command 'broken' (entry point broken") and "kgengine.commands" in line
