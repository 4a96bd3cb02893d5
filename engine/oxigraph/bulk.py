"""A load's N-Quads streamed into pyoxigraph's Rust bulk loader while a Python thread writes them.

The loader reads a pipe by path (``/dev/fd/N``) natively, without the GIL, so converting
and loading run side by side; where there are no pipes to open by path, the N-Quads go
through a spool file in the store directory."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kgengine.errors import StoreError

SPOOL_PREFIX = ".kgengine-spool-"  # temporary N-Quads in the store directory (no pipes)
USE_PIPES = os.name == "posix" and Path("/dev/fd").is_dir()
_ABORT = b"\n!kgengine-abort\n"  # not N-Quads: makes the Rust parser stop with an error
_F_SETPIPE_SZ = 1031  # Linux fcntl: a bigger pipe buffer means fewer switches between threads


def bulk_load(load: Callable[[str], None], directory: Path, write: Callable[[BinaryIO], None],
              graph: str) -> None:
    """Bulk load the N-Quads that ``write`` produces with ``load(path)`` (the store's Rust
    loader reading N-Quads from a path; a callable, not the pyoxigraph store, so that a
    traceback kept after a failure holds no open store, and so no lock): through a pipe
    while ``write`` runs in a thread; where there are no pipes to open by path, through a
    spool file in the store ``directory``."""
    if not USE_PIPES:
        _bulk_load_spooled(load, directory, write, graph)
        return
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(ImportError, OSError):
        import fcntl  # POSIX only, like the pipes

        fcntl.fcntl(write_fd, _F_SETPIPE_SZ, 1 << 20)
    failure: list[BaseException] = []

    def produce() -> None:
        try:
            with open(write_fd, "wb") as out:
                try:
                    write(out)
                except BrokenPipeError:
                    raise
                except BaseException as exc:  # re-raised in the calling thread
                    failure.append(exc)
                    out.write(_ABORT)
        except BrokenPipeError:
            pass  # the loader stopped reading: its own error is reported

    producer = threading.Thread(target=produce, name=f"kgengine-load-{graph}", daemon=True)
    producer.start()
    error: BaseException | None = None
    try:
        load(f"/dev/fd/{read_fd}")
    except (OSError, SyntaxError) as exc:
        error = exc
    finally:
        os.close(read_fd)  # unblocks a producer still writing
        producer.join()
    if failure:
        raise failure[0]
    if error is not None:
        raise StoreError(f"bulk load of graph {graph!r} failed: {error}") from error


def _bulk_load_spooled(load: Callable[[str], None], root: Path, write: Callable[[BinaryIO], None],
                       graph: str) -> None:
    for stale in root.glob(SPOOL_PREFIX + "*"):  # left by a killed load
        stale.unlink(missing_ok=True)
    fd, name = tempfile.mkstemp(prefix=SPOOL_PREFIX, suffix=".nq", dir=root)
    try:
        with open(fd, "wb") as out:
            write(out)
        load(name)
    except (OSError, SyntaxError) as exc:
        raise StoreError(f"bulk load of graph {graph!r} failed: {exc}") from exc
    finally:
        Path(name).unlink(missing_ok=True)
