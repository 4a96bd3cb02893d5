"""AMIE 3's rule measures as pure arithmetic (no I/O, no KG access).

For a rule ``B ⇒ r(x, y)`` (AMIE 3's DefaultMiningAssistant, LazyMiningAssistant):

- support: distinct (x, y) with the body and the head in the KG;
- head coverage: support / #facts of r;
- body size: distinct (x, y) satisfying the body; standard confidence = support / body size;
- PCA body size: distinct (x, y) satisfying the body and ``r(x, y')`` for some y', where x is the
  head's *functional variable*; PCA confidence = support / PCA body size.

The functional variable: AMIE 3 counts on the more functional side of the head relation.
fun(r) = #distinct subjects / #facts, ifun(r) = #distinct objects / #facts; the subject is the
functional variable when fun(r) >= ifun(r) (``KB.isFunctional``), otherwise the object, and then
the PCA body counts pairs whose *object* has some ``r(x', y)``. On Family facts.txt this picks
the object for 9 of 12 relations (e.g. father: 671 subjects, 1,236 objects); the reference AMIE 3
output agrees on all 145 rules (tests/test_mining_amie_parity.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum


class Side(StrEnum):
    SUBJECT = "subject"
    OBJECT = "object"


@dataclass(frozen=True, slots=True)
class RelationStats:
    facts: int
    subjects: int  # distinct subjects
    objects: int  # distinct objects

    def functionality(self, inverse: bool = False) -> float:
        """AMIE's fun(r), distinct subjects per fact (1: one object per subject); ``inverse``:
        ifun(r), distinct objects per fact."""
        return (self.objects if inverse else self.subjects) / max(self.facts, 1)

    @property
    def functional_side(self) -> Side:
        """AMIE 3's counting variable for a head with this relation (ties go to the subject,
        as in ``KB.isFunctional``: fun >= ifun). Compared as integers: same facts count."""
        return Side.SUBJECT if self.subjects >= self.objects else Side.OBJECT


@dataclass(frozen=True, slots=True)
class Measures:
    """Counts of one rule; the ratios are derived exactly as AMIE computes them (doubles)."""

    support: int
    head_size: int  # facts of the head relation
    body_size: int
    pca_body_size: int
    functional_side: Side

    @property
    def head_coverage(self) -> float:
        return self.support / self.head_size if self.head_size else 0.0

    @property
    def std_confidence(self) -> float:
        return self.support / self.body_size if self.body_size else 0.0

    @property
    def pca_confidence(self) -> float:
        return self.support / self.pca_body_size if self.pca_body_size else 0.0

    @property
    def is_perfect(self) -> bool:
        """PCA confidence exactly 1: AMIE 3 (``Rule.isPerfect``) stops refining such a rule.
        It tests the PCA confidence, not the standard one; since support <= PCA body size <=
        body size, std = 1 implies PCA = 1, so only PCA matters."""
        return self.pca_body_size > 0 and self.support == self.pca_body_size


def support_threshold(min_hc: float, head_size: int) -> int:
    """AMIE's absolute support threshold for the candidates of a head, ``ceil(minhc * |r|)``
    in doubles (AMIE.getCountThreshold): a candidate is kept when its support reaches it."""
    return int(math.ceil(min_hc * float(head_size)))


def lazy_cap(support: int, min_ratio: float) -> int | None:
    """LazyMiningAssistant's counting limit: once a denominator exceeds
    ``ceil(support / min_ratio) + 1`` the ratio is below the threshold, so counting stops there.
    None (count everything) when the threshold is 0."""
    if min_ratio <= 0:
        return None
    return int(math.ceil(support / min_ratio)) + 1


def amie_number(value: float) -> str:
    """Java ``DecimalFormat("#.#########")`` as AMIE prints ratios: at most 9 decimals, rounded
    half-even on the exact binary value, trailing zeros (and a trailing point) dropped."""
    text = format(Decimal(value).quantize(Decimal("1e-9"), rounding=ROUND_HALF_EVEN), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text
