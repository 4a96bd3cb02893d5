"""App. H answerability check: it passes re-derivable removals and catches the others, and a
failing check fails the build with a clear message."""

from __future__ import annotations

from pathlib import Path

import kgengine.brink.build as build_module
import pytest
from click.testing import CliRunner
from kgengine.brink.answerability import Answerability, check_answerability, derived_heads
from kgengine.brink.removal import Grounding
from kgengine.cli import main
from kgengine.mining.rules import parse_rule
from kgengine.model import Triple as T
from kgengine.oxigraph.store import OxigraphStore


@pytest.fixture
def store(tmp_path: Path):
    with OxigraphStore(str(tmp_path / "store")) as opened:
        opened.load("kg", [T("b", "husband", "a"), T("x", "son", "y"), T("y", "wife", "z"),
                           T("z", "loves", "z")], dataset="t")
        yield opened


def test_rederived_and_missing_heads(store: OxigraphStore) -> None:
    inversion = parse_rule("husband(?b,?a) => wife(?a,?b)")
    chain = parse_rule("son(?b,?e) & wife(?e,?a) => father(?a,?b)")
    ident = {e: e for e in "abcdxyz"}
    kept = [
        Grounding(0, (T("b", "husband", "a"),), T("a", "wife", "b")),  # derivable
        Grounding(0, (T("d", "husband", "c"),), T("c", "wife", "d")),  # body not in the store
        Grounding(1, (T("x", "son", "y"), T("y", "wife", "z")), T("z", "father", "x")),
    ]
    result = check_answerability(store, "kg", [inversion, chain], kept, ident, workers=2)
    assert (result.checked, result.rederived) == (3, 2)
    assert result.failures == ((T("c", "wife", "d"), str(inversion)),)
    assert result.fraction == pytest.approx(2 / 3)


def test_derived_heads_handles_a_head_with_one_variable_twice(store: OxigraphStore) -> None:
    reflexive = parse_rule("loves(?a,?e) & loves(?e,?a) => self(?a,?a)")
    assert derived_heads(store, "kg", reflexive, "z") == {T("z", "self", "z")}
    assert derived_heads(store, "kg", reflexive, "b") == set()


def test_a_failing_check_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "store")
    assert CliRunner().invoke(main, ["load", "family", "--store", store, "--graph", "f",
                                     "--splits", "facts"]).exit_code == 0
    rules = tmp_path / "rules.tsv"
    rules.write_text("body\thead\nhusband(?b,?a)\twife(?a,?b)\n")

    def broken(*args, **kwargs) -> Answerability:
        return Answerability(2, 1, ((T("e1", "wife", "e2"), "husband(?b,?a) => wife(?a,?b)"),))

    monkeypatch.setattr(build_module, "check_answerability", broken)
    done = CliRunner().invoke(main, ["brink", "build", "--store", store, "--graph", "f", "--rules",
                                     str(rules), "--groundings-per-rule", "2", "-o", str(tmp_path / "o")])
    assert done.exit_code == 1
    assert "answerability check failed: only 1 of 2 kept groundings (50.00%)" in done.output
    assert "('e1', 'wife', 'e2') is not derived by husband(?b,?a) => wife(?a,?b)" in done.output
    assert (tmp_path / "o" / "stats.json").is_file()  # written, to inspect the failures
