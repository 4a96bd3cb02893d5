"""Progress for long work: rich bars on an interactive stderr, one line per phase in logs,
silent when disabled."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Reporter:
    """What long-running code calls; a no-op when progress is off."""

    def __init__(self, progress: Progress | None = None, task: int | None = None) -> None:
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def update(self, *, total: int | None = None, description: str | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, description=description)


NO_PROGRESS = Reporter()


class PhaseLog(Reporter):
    """Without a terminal: one stderr line per phase (each ``update`` with a description)
    instead of a bar, so logs say what a long step is doing without carriage returns."""

    def update(self, *, total: int | None = None, description: str | None = None) -> None:
        if description:
            print(description, file=sys.stderr, flush=True)


@contextmanager
def progress_bar(description: str, total: int | None = None, enabled: bool = True) -> Iterator[Reporter]:
    if not enabled:
        yield NO_PROGRESS
        return
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield Reporter(progress, task)
