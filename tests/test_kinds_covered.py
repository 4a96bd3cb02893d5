"""The meta-test of the generic contracts (tests/helpers/kinds.py): every implementation a
registry lists has its test case in its kind's contract, and one registered without a case
is reported, by name, with the file its case belongs in."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.kinds import KindCases
from test_loader_contract import LOADER_CASES
from test_methods_contract import METHOD_CASES
from test_question_readers import READER_CASES
from test_store_contract import BACKEND_CASES

KINDS: dict[str, KindCases[Any]] = {
    "method": METHOD_CASES,
    "question-set reader": READER_CASES,
    "dataset loader": LOADER_CASES,
    "store backend": BACKEND_CASES,
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_registered_implementation_has_a_test_case(kind: str) -> None:
    cases = KINDS[kind]
    assert cases.uncovered() == [], f"registered without a test case (add them to {cases.home})"
    assert set(cases.cases) <= set(cases.registry.names()), "a case for a name no registry lists"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_implementation_registered_without_a_case_is_reported(kind: str) -> None:
    cases = KINDS[kind]
    registry = cases.registry
    registry.register("uncovered-example", registry.get(registry.names()[0]))
    try:
        assert cases.uncovered() == ["uncovered-example"]
        assert "uncovered-example" in cases.registry.names()  # so its contract tests run, and fail
        with pytest.raises(pytest.fail.Exception, match=f"no test case: add one to {cases.home}"):
            cases.case("uncovered-example")
    finally:
        registry.unregister("uncovered-example")
    assert cases.uncovered() == []
