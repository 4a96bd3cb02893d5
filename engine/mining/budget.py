"""The memory budget of a count: rows are evaluated in blocks, every sparse message is checked
against a budget of non-zeros before it is built, and a block that would pass it is halved and
evaluated again.

Every strategy of the matrix engine reads ``MESSAGE_BUDGET`` and ``CHUNK_ROWS`` from this
module when it runs (``budget.MESSAGE_BUDGET``, not a copy), so one setting bounds them all."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from kgengine.mining.rows import Rows

# rows per block of a count: bounds the memory of one sparse product, and lets a capped count
# stop early
CHUNK_ROWS = 4096
# nonzeros one message (a sparse rows x entities matrix) may hold before its block is halved:
# ~200 MB with its intermediates; a hub entity's neighbours are what reaches it
MESSAGE_BUDGET = 16_000_000
T = TypeVar("T")


class MessageTooLarge(Exception):
    """A message of the block being evaluated would pass the memory budget: the caller splits
    the block in two and evaluates the halves (hub entities are why; see ``in_blocks``)."""


_GUARD = threading.local()  # whether the budget applies (off for a single-row block)


def check_budget(nonzeros: int) -> None:
    if nonzeros > MESSAGE_BUDGET and getattr(_GUARD, "on", False):
        raise MessageTooLarge(nonzeros)


def in_blocks(rows: Rows, evaluate: Callable[[Rows, bool], T]) -> Iterator[T]:
    """``evaluate`` on blocks of at most CHUNK_ROWS rows (one per group), in order; the
    results add up over the blocks (disjoint head bindings). A block whose messages would
    pass MESSAGE_BUDGET is halved and retried, down to one row (then it runs whatever its
    size: one binding's values are at most the entities). ``whole`` tells ``evaluate``
    that its block is all the rows."""
    pending = [(start, min(start + CHUNK_ROWS, len(rows)))
               for start in range(0, len(rows), CHUNK_ROWS)][::-1]
    while pending:
        start, stop = pending.pop()
        _GUARD.on = stop - start > 1
        try:
            result = evaluate(rows.window(start, stop), stop - start == len(rows))
        except MessageTooLarge:
            middle = (start + stop) // 2
            pending += [(middle, stop), (start, middle)]
            continue
        finally:
            _GUARD.on = False
        yield result
