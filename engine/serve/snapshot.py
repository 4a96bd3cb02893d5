"""The read-only server's private snapshot of the store.

Why: a store opened with ``Store.read_only`` while another process writes to it is
"undefined behaviour" in pyoxigraph's words, and measured so here: after a writer
compacted the store, a read-only worker failed with ``IO error: No such file or directory: …/000079.sst``
on a file it had not opened yet. So the server never reads the live store. It takes a
RocksDB checkpoint (``Store.backup``): hard links to the store's immutable SST files plus a
copy of its small metadata, made in milliseconds on the same file system; the writer may
then compact and delete whatever it likes, the links keep the snapshot's files alive. The
write-ahead logs are copied too, so data committed but not yet flushed by a running writer
is in the snapshot. Workers open the snapshot read-only; SIGHUP takes a new one. (Reading
commands do the same, each with a snapshot of its own: ``kgengine.oxigraph_store``, where
the snapshot itself is taken.)

Snapshots live beside the store in ``.<store name>.serve/<pid>-<n>`` (same file system, so
hard links work; elsewhere RocksDB would copy every file) and are removed when the server
no longer needs them; ones left by a killed server are removed at the next start."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from kgengine.oxigraph_store import remove_stale, take_snapshot
from kgengine.oxigraph_store import snapshot_root as _snapshot_root

__all__ = ["Snapshots", "remove_stale", "snapshot_root", "take_snapshot"]
log = logging.getLogger("kgengine.serve")


def snapshot_root(store: Path) -> Path:
    return _snapshot_root(store, "serve")


class Snapshots:
    """Numbered snapshots of one store for this process."""

    def __init__(self, store: str) -> None:
        self.store = Path(store)
        root = snapshot_root(self.store)
        try:
            root.mkdir(exist_ok=True)
            remove_stale(root)
        except OSError:  # no write access beside the store: use the temp dir (may copy)
            root = Path(tempfile.gettempdir()) / "kgengine-serve"
            root.mkdir(exist_ok=True)
            log.warning("cannot write beside %s; snapshots go to %s", self.store, root)
        self.root = root
        self.count = 0

    def take(self) -> Path:
        self.count += 1
        return take_snapshot(self.store, self.root / f"{os.getpid()}-{self.count}")

    def remove(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):  # leave no empty .<store>.serve directory behind
            self.root.rmdir()
