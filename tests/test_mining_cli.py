"""``kgengine mine`` and ``kgengine groundings`` through the real CLI on an on-disk store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.cli import run_cli_raising as run
from kgengine.cli import main
from kgengine.mining import search
from kgengine.mining.io import read_rules
from kgengine.mining.rules import parse_rule
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore
from test_mining_amie_parity import STDOUT, amie_lines
from test_mining_small import TOY, substitutions


@pytest.fixture(scope="module")
def mining_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Family facts.txt (as BRINK mines it), the toy KG and an empty graph, via the CLI."""
    location = str(tmp_path_factory.mktemp("cli") / "store")
    runner = CliRunner()
    result = runner.invoke(main, ["load", "family", "--store", location, "--splits", "facts",
                                  "--graph", "family-facts"])
    assert result.exit_code == 0, result.output
    store = OxigraphStore(location)
    try:
        store.load("toy", TOY, dataset="toy")
        store.load("empty", [], dataset="empty")
    finally:
        store.close()
    return location


def test_mine_writes_amie_tsv_and_json(mining_store: str, tmp_path: Path) -> None:
    tsv, js = tmp_path / "rules.tsv", tmp_path / "rules.json"
    result = run("mine", "--store", mining_store, "--graph", "family-facts", "-o", str(tsv),
                 "--json", str(js))
    assert result.exit_code == 0, result.output
    lines = tsv.read_text().splitlines()
    assert lines[0] == "Rule\tHead Coverage\tStd Confidence\tPCA Confidence\tPositive Examples" \
                       "\tBody size\tPCA Body size\tFunctional variable"
    assert sorted(lines[1:]) == sorted(amie_lines(STDOUT))  # diffable against AMIE 3
    payload = json.loads(js.read_text())
    assert payload["meta"]["rules"] == 145
    kinds = [r["rule_type"] for r in payload["rules"]]
    assert (kinds.count("inversion"), kinds.count("composition"), kinds.count("other")) == (6, 56, 83)
    # the summary table by rule type
    assert "composition" in result.output and "145 rules" in result.output
    # and both files read back as the same rules
    assert {r.rule for r in read_rules(tsv)} == {r.rule for r in read_rules(js)} \
        == {r.rule for r in read_rules(STDOUT)}


def test_mine_to_stdout_with_options(mining_store: str) -> None:
    result = run("mine", "--store", mining_store, "--graph", "toy", "--min-initial-support", "1",
                 "--max-len", "2", "--no-skyline", "--engine", "query")
    assert result.exit_code == 0, result.output
    rule_lines = [line for line in result.stdout.splitlines() if "=>" in line]
    assert rule_lines
    assert all(len(parse_rule(line.split("\t")[0]).body) == 1 for line in rule_lines)


@pytest.mark.parametrize("args, message", [
    (["--min-conf", "1.5"], "--min-conf must be between 0 and 1"),
    (["--min-hc", "-0.2"], "--min-hc must be between 0 and 1"),
    (["--max-len", "1"], "--max-len must be at least 2"),
    (["--graph", "nope"], "no graph 'nope'"),
    (["--graph", "empty"], "has no triples"),
    ([], "choose a graph with --graph"),
])
def test_mine_bad_input(mining_store: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["mine", "--store", mining_store, *args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_mine_interrupted_writes_nothing(mining_store: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self, on_head_done=None):  # noqa: ANN001, ANN202 - Miner.mine's signature
        raise KeyboardInterrupt

    monkeypatch.setattr(search.Miner, "mine", interrupted)
    out = tmp_path / "rules.tsv"
    result = CliRunner().invoke(main, ["mine", "--store", mining_store, "--graph", "toy", "-o", str(out)])
    assert result.exit_code != 0 and "interrupted" in result.output
    assert not out.exists() and not list(tmp_path.iterdir())


def test_groundings_command(mining_store: str) -> None:
    rule = "parent(?a,?f) & parent(?f,?b) => grandparent(?a,?b)"
    parsed = parse_rule(rule)  # canonical names: ?a, ?b for the head, ?e for the path's middle
    assert parsed.variables == {"?a", "?b", "?e"}
    expected_all = {(s["?a"], s["?b"], s["?e"]) for s in substitutions(set(TOY), parsed.body)}
    facts = set(TOY)
    for flag, keep in (("--any-head", lambda a, b: True),
                       ("--with-head", lambda a, b: Triple(a, "grandparent", b) in facts),
                       ("--without-head", lambda a, b: Triple(a, "grandparent", b) not in facts)):
        result = run("groundings", rule, "--store", mining_store, "--graph", "toy", flag, "--json")
        assert result.exit_code == 0, result.output
        rows = json.loads(result.output)["groundings"]
        assert {(r["a"], r["b"], r["e"]) for r in rows} == {t for t in expected_all if keep(t[0], t[1])}
    # AMIE notation, a limit, and the table output
    result = run("groundings", "?a  parent  ?f  ?f  parent  ?b   => ?a  grandparent  ?b",
                 "--store", mining_store, "--graph", "toy", "--limit", "2")
    assert result.exit_code == 0 and "2 groundings" in result.output


@pytest.mark.parametrize("rule", ["parent(?a,?b) => ", "parent(?a) => child(?a,?b)", "no arrow"])
def test_groundings_bad_rule(mining_store: str, rule: str) -> None:
    result = CliRunner().invoke(main, ["groundings", rule, "--store", mining_store, "--graph", "toy"])
    assert result.exit_code != 0 and "cannot parse rule" in result.output
