"""The read-only server's private snapshots of the store.

The server never reads the live store, which another process may be writing: it reads a
RocksDB checkpoint (hard links to the store's immutable files plus a copy of its
write-ahead logs; why, and how it is taken: :mod:`kgengine.oxigraph.snapshots`, which
reading commands use too). Workers open the snapshot read-only; SIGHUP takes a new one.

Snapshots live beside the store in ``.<store name>.serve/<pid>-<n>`` (same file system, so
hard links work; elsewhere RocksDB would copy every file) and are removed when the server
no longer needs them; ones left by a killed server are removed at the next start."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from kgengine.oxigraph.snapshots import remove_snapshot_dir, remove_stale, snapshot_root, take_snapshot

__all__ = ["Snapshots"]
log = logging.getLogger("kgengine.serve")


class Snapshots:
    """Numbered snapshots of one store for this process."""

    def __init__(self, store: str) -> None:
        self.store = Path(store)
        root = snapshot_root(self.store, "serve")
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
        remove_snapshot_dir(path)  # and the .<store>.serve directory once empty
