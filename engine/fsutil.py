"""Files written so that an interrupted run never leaves half of one: the one helper for it.

Everything goes to a temporary file beside the target (same directory, so the rename is
atomic on POSIX and Windows), which replaces the target only once complete; on any error,
Ctrl-C included, the temporary file is removed and the target is as it was. A process killed
outright leaves its temporary (``.NAME.PID.XXXXXXXX.tmp``): :func:`remove_stale_temporaries`
removes those whose process is gone."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

_TEMPORARY = re.compile(r"\..+\.(\d+)\.[^.]+\.tmp")  # .NAME.PID.XXXXXXXX.tmp


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, folder: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to (by any means: a library writing to a
    path; ``folder``: an empty folder to fill); it replaces ``path`` when the block ends
    without an error (a folder replaces only a missing or empty one: else OSError)."""
    target = Path(path)
    prefix = f".{target.name}.{os.getpid()}."
    if folder:
        temporary = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=target.parent))
    else:
        handle, name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=target.parent)
        os.close(handle)
        temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        if folder:
            shutil.rmtree(temporary, ignore_errors=True)
        else:
            temporary.unlink(missing_ok=True)


def remove_stale_temporaries(folder: Path) -> None:
    """Remove the temporaries in ``folder`` that :func:`atomic_path` left for processes that
    are gone (killed while writing)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    import psutil  # here, not at the top: every command imports this module

    for name in names:
        match = _TEMPORARY.fullmatch(name)
        if match and not psutil.pid_exists(int(match.group(1))):
            path = folder / name
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


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
