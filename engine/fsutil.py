"""Files written so that an interrupted run never leaves half of one: the one helper for it.

Everything goes to a temporary file beside the target (same directory, so the rename is
atomic on POSIX and Windows), which replaces the target only once complete; on any error,
Ctrl-C included, the temporary file is removed and the target is as it was."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to (by any means: a library writing to a
    path, a directory tree); it replaces ``path`` when the block ends without an error."""
    target = Path(path)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


@contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8",
                 newline: str | None = None) -> Iterator[IO]:
    """``open(path, mode)`` for writing, atomically: the file appears, complete, when the
    block ends without an error ("w" text by default, "wb" for bytes)."""
    if "b" in mode:
        encoding = None
    with atomic_path(path) as temporary, open(temporary, mode, encoding=encoding, newline=newline) as out:
        yield out
        out.flush()
        os.fsync(out.fileno())


def write_text_atomically(path: str | os.PathLike[str], text: str) -> None:
    with atomic_write(path) as out:
        out.write(text)
