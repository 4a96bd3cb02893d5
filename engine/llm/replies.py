"""What the client does to a reply's text and to a prompt's length, with no I/O: stop
sequences, repetition loops (a runaway reply), and the conservative token estimate used when
the server has no tokenizer endpoint."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first stop sequence: servers that ignore ``stop`` behave like the
    ones that honour it."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i != -1), default=len(text))
    return text[:cut]


@dataclass(frozen=True)
class Loop:
    """A repetition at the end of a reply: ``unit`` repeated ``repeats`` times from ``start``."""

    start: int
    unit: str
    repeats: int

    def cut(self, text: str) -> str:
        """The reply up to the end of the loop's first round (what the model meant to say)."""
        return text[: self.start + len(self.unit)].rstrip()

    def describe(self) -> str:
        shown = self.unit.strip() or repr(self.unit)
        shown = shown if len(shown) <= 60 else shown[:60] + "…"
        return f"{shown!r} repeated {self.repeats} times"


# A finished reply (stopped by max_tokens) is a runaway with 3 rounds of a loop; a reply still
# streaming needs 8, so a list that merely repeats a word is left to finish.
FINISHED_LOOP = (3, 30)  # (repeats, characters covered at least)
STREAMING_LOOP = (8, 80)
MAX_PERIOD = 200  # characters: longer cycles are not what small models fall into


def find_loop(text: str, repeats: int = FINISHED_LOOP[0], min_span: int = FINISHED_LOOP[1],
              max_period: int = MAX_PERIOD) -> Loop | None:
    """The shortest cycle that ``text`` ends with, repeated at least ``repeats`` times over at
    least ``min_span`` characters, or None. The tail may stop mid-round (a reply cut at
    max_tokens): any rotation of a cycle is a cycle, and the start is moved back to where the
    repetition really begins."""
    n = len(text)
    for period in range(1, min(max_period, n // repeats) + 1):
        unit = text[n - period:]
        if text[n - 2 * period:n - period] != unit:
            continue
        rounds = 2
        while n - (rounds + 1) * period >= 0 and text[n - (rounds + 1) * period:n - rounds * period] == unit:
            rounds += 1
        if rounds < repeats or rounds * period < min_span:
            continue
        start = n - rounds * period
        while start > 0 and text[start - 1] == text[start - 1 + period]:
            start -= 1
        return Loop(start, text[start:start + period], (n - start) // period)
    return None


# The estimate must not undercount, whatever the text: BPE vocabularies split digits one by
# one (Llama, SmolLM2), give most punctuation its own token, fall back to bytes outside ASCII,
# and cut rare words into pieces of 2-3 letters. So: one token per digit, per punctuation mark
# and per non-ASCII byte, one per 2 letters of a word (common words are 1 token for 3-8
# letters), and one per space except the one that a word's first token carries. It over-counts
# English prose about 2x; on id triples such as "(1043, aunt, 72)" it is close to exact.
_PIECES = re.compile(r"[A-Za-z]+|[0-9]|\s+|[\x21-\x7e]|[^\x00-\x7f]")
ESTIMATE_RULE = ("one token per digit, per punctuation mark, per non-ASCII byte, per 2 letters and per "
                 "space not followed by a letter (conservative: over-counts English about 2x)")


def estimate_tokens(text: str) -> int:
    """A conservative (over-)estimate of ``text``'s token count, for servers that cannot
    count: see :data:`ESTIMATE_RULE`."""
    total = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isascii() and first.isalpha():
            total += math.ceil(len(piece) / 2)
        elif first.isspace():
            following = text[match.end():match.end() + 1]
            carried = 1 if piece.endswith(" ") and following.isascii() and following.isalpha() else 0
            newlines = piece.count("\n")
            total += newlines + math.ceil((len(piece) - newlines - carried) / 2)
        elif first.isascii():
            total += 1
        else:
            total += len(piece.encode("utf-8"))
    return total
