"""Progress for long work: rich bars on an interactive stderr, one line per phase (and a
count with an ETA every few seconds) in logs, silent when disabled."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Reporter:
    """What long-running code calls; a no-op when progress is off."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def update(self, *, total: int | None = None, description: str | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, description=description)

    def start(self, description: str, total: int | None = None) -> None:
        """A new phase: the count starts again from 0 towards ``total`` (None: unknown).
        A reporter that only overrides ``update`` hears of it there."""
        if self._progress is not None and self._task is not None:
            self._progress.reset(self._task, total=total, description=description)
        else:
            self.update(total=total, description=description)


NO_PROGRESS = Reporter()


def eta_text(done: int, total: int | None, elapsed: float) -> str:
    """``12,000/40,000 (30%), ETA 7 s`` (the rate so far extrapolated), or a bare count when
    the total is unknown."""
    if not total:
        return f"{done:,}"
    share = min(done / total, 1.0)
    text = f"{done:,}/{total:,} ({share:.0%})"
    if 0 < done < total and elapsed > 0:
        text += f", ETA {elapsed * (total - done) / done:.0f} s"
    return text


class PhaseLog(Reporter):
    """Without a terminal: one stderr line per phase (each ``start`` or ``update`` with a
    description) and, during a long phase, a line with the count, total and ETA every
    ``every`` seconds, instead of a bar (no carriage returns in logs)."""

    def __init__(self, every: float = 2.0, stream: TextIO | None = None) -> None:
        super().__init__()
        self.every = every
        self._stream = stream
        self._description = ""
        self._total: int | None = None
        self._done = 0
        self._started = self._last = time.monotonic()

    def _print(self, text: str) -> None:
        print(text, file=self._stream or sys.stderr, flush=True)

    def start(self, description: str, total: int | None = None) -> None:
        self._done, self._total = 0, total
        self._started = self._last = time.monotonic()
        self._description = description
        self._print(description)

    def update(self, *, total: int | None = None, description: str | None = None) -> None:
        if total is not None:
            self._total = total
        if description:
            self._description = description
            self._print(description)

    def advance(self, n: int = 1) -> None:
        self._done += n
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._print(f"{self._description}: {eta_text(self._done, self._total, now - self._started)}")


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
