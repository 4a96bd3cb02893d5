"""Errors the CLI turns into a one-line message and a non-zero exit (no traceback)."""

from __future__ import annotations


class KGEngineError(Exception):
    """Base class: a problem the user can fix (bad input, missing graph, bad option)."""


class InputError(KGEngineError):
    """A malformed input line: names the file, the 1-based line number and the text."""

    def __init__(self, path: str, line: int, text: str, reason: str) -> None:
        self.path, self.line, self.text, self.reason = path, line, text, reason
        shown = text if len(text) <= 200 else text[:200] + "…"
        super().__init__(f"{path}:{line}: {reason}: {shown!r}")


class GraphExistsError(KGEngineError):
    pass


class GraphNotFoundError(KGEngineError):
    pass


class StoreError(KGEngineError):
    """The store cannot be opened or reached (locked, unreachable server, bad credentials)."""
