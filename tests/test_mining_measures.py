"""Measure arithmetic and rule files: AMIE's number formatting checked against the reference
output's own strings, the functional-variable choice, and reading / writing rule files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from kgengine.errors import KGEngineError
from kgengine.mining.io import MinedRule, read_rules, write_json, write_tsv
from kgengine.mining.measures import Measures, RelationStats, Side, amie_number, lazy_cap
from shared_data import DATASETS
from test_mining_amie_parity import STDOUT, amie_lines


def test_amie_number_formatting_matches_amie_output() -> None:
    """Every ratio of the reference, recomputed from its counts and the relation sizes of
    facts.txt, prints exactly as AMIE printed it (Java DecimalFormat "#.#########")."""
    sizes = Counter(line.split("\t")[1] for line in
                    (DATASETS / "family" / "facts.txt").read_text().splitlines() if line)
    for line in amie_lines(STDOUT):
        rule, hc, std, pca, support, body, pca_body, _ = line.split("\t")
        head = rule.split("=>")[1].split()[1]
        assert amie_number(int(support) / sizes[head]) == hc
        assert amie_number(int(support) / int(body)) == std
        assert amie_number(int(support) / int(pca_body)) == pca


@pytest.mark.parametrize("value, text", [
    (1.0, "1"), (0.5, "0.5"), (2 / 3, "0.666666667"), (0.0, "0"), (1e-10, "0"),
    (0.1234567885, "0.123456788"),  # half-even on the exact binary value (just below ...885)
])
def test_amie_number_edge_cases(value: float, text: str) -> None:
    assert amie_number(value) == text


def test_functional_side_and_measures() -> None:
    # father in facts.txt: 671 subjects, 1,236 objects -> the object is functional
    assert RelationStats(1236, 671, 1236).functional_side == Side.OBJECT
    assert RelationStats(978, 703, 674).functional_side == Side.SUBJECT  # daughter
    assert RelationStats(10, 5, 5).functional_side == Side.SUBJECT  # a tie: fun >= ifun
    m = Measures(support=368, head_size=1236, body_size=577, pca_body_size=368,
                 functional_side=Side.OBJECT)
    assert m.is_perfect and m.pca_confidence == 1.0
    assert m.std_confidence == pytest.approx(0.637781629, abs=1e-9)
    assert not Measures(1, 2, 0, 0, Side.SUBJECT).is_perfect
    assert lazy_cap(10, 0.4) == 26 and lazy_cap(10, 0.0) is None


def test_rule_files_round_trip(tmp_path: Path) -> None:
    rules = read_rules(STDOUT)
    tsv, js = tmp_path / "r.tsv", tmp_path / "r.json"
    write_tsv(rules, tsv)
    write_json(rules, js, {"graph": "x"})
    for path in (tsv, js):
        back = read_rules(path)
        assert [r.rule for r in back] == [r.rule for r in rules]
        assert [(r.support, r.body_size, r.pca_body_size, r.functional_variable) for r in back] \
            == [(r.support, r.body_size, r.pca_body_size, r.functional_variable) for r in rules]
    assert json.loads(js.read_text())["meta"] == {"graph": "x"}
    assert tsv.read_text().splitlines()[1:] == amie_lines(STDOUT)


def test_rule_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("Rule\tHead Coverage\n?a  r  ?b  ?c   => ?a  h\t0.5\n")
    with pytest.raises(KGEngineError, match="bad.tsv:2"):
        read_rules(bad)
    empty = tmp_path / "empty.tsv"
    empty.write_text("Rule\tHead Coverage\n")
    with pytest.raises(KGEngineError, match="no rules"):
        read_rules(empty)
    with pytest.raises(KGEngineError, match="cannot read"):
        read_rules(tmp_path / "missing.tsv")


def test_mined_rule_json_has_rule_type() -> None:
    rule = read_rules(STDOUT)[0]
    assert isinstance(rule, MinedRule)
    data = rule.to_json()
    assert data["rule_type"] == "inversion" and data["amie"] == "?b  husband  ?a   => ?a  wife  ?b"
