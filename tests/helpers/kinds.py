"""Generic test cases per kind of extension (pykeen-style): each kind's contract is one test
class parametrized over every name its registry lists, and every registered implementation
needs its *case* there (the input it is exercised on: a file in its format, a store to open,
...). A name without one fails its contract tests, and tests/test_kinds_covered.py fails
while any registry lists a name that its kind's cases lack — registering a new
implementation is what gets it tested, and forgetting its case is reported."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pytest
from kgengine.registry import Registry

C = TypeVar("C")


@dataclass(frozen=True)
class KindCases(Generic[C]):
    """The cases of one kind: ``registry`` lists the implementations, ``cases`` maps a name
    to how its contract exercises it, ``home`` is the test file holding both."""

    registry: Registry[Any]
    cases: Mapping[str, C]
    home: str

    def uncovered(self) -> list[str]:
        """The registered names without a case."""
        return [name for name in self.registry.names() if name not in self.cases]

    def case(self, name: str) -> C:
        if name not in self.cases:
            pytest.fail(f"{self.registry.kind} {name!r} is registered ({self.registry.where(name)}) "
                        f"but has no test case: add one to {self.home}")
        return self.cases[name]
