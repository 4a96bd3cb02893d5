"""The user-error types: what the CLI turns into a one-line message and a non-zero exit.

A :class:`KGEngineError` is a problem the user can fix (bad input, a missing graph, a bad
option, an unwritable output path) and names what to fix. Anything else that escapes a
command is a bug and shows its traceback: the CLI converts no other exception."""

from __future__ import annotations


class KGEngineError(Exception):
    """Base class: a problem the user can fix (bad input, missing graph, bad option)."""


class ServiceError(KGEngineError):
    """A service the run depends on failed (an LLM endpoint down or too slow): unlike a
    question that cannot be answered, it makes an evaluation's scores wrong, so it fails it."""


class InvalidParameterError(KGEngineError, ValueError):
    """A parameter value out of its domain (a graph name, a number of hops, an output path);
    also a ``ValueError`` for library callers."""


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


class GraphIncompleteError(KGEngineError):
    """The graph is marked 'loading': its load was interrupted."""


class QueryError(KGEngineError):
    """A user's query the store cannot parse or run."""


class StoreError(KGEngineError):
    """The store cannot be opened or reached (locked, unreachable server, bad credentials)."""


class StoreLockedError(StoreError):
    """Another process holds the store's one writer lock; names that process."""


class QueryStopped(QueryError):
    """A query ran past its ``--timeout`` and was stopped."""
