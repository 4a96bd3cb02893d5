"""The read-only server's private snapshot of the store.

Why: a store opened with ``Store.read_only`` while another process writes to it is
"undefined behaviour" in pyoxigraph's words, and measured so here: after a writer (even
`kgengine query`, which opens the store read-write and flushes on close) compacted the
store, a read-only worker failed with ``IO error: No such file or directory: …/000079.sst``
on a file it had not opened yet. So the server never reads the live store. It takes a
RocksDB checkpoint (``Store.backup``): hard links to the store's immutable SST files plus a
copy of its small metadata, made in milliseconds on the same file system; the writer may
then compact and delete whatever it likes, the links keep the snapshot's files alive. The
write-ahead logs are copied too, so data committed but not yet flushed by a running writer
is in the snapshot. Workers open the snapshot read-only; SIGHUP takes a new one.

Snapshots live beside the store in ``.<store name>.serve/<pid>-<n>`` (same file system, so
hard links work; elsewhere RocksDB would copy every file) and are removed when the server
no longer needs them; ones left by a killed server are removed at the next start."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import pyoxigraph as ox

log = logging.getLogger("kgengine.serve")
ATTEMPTS = 20  # a checkpoint races a writer's compaction or log rotation: retry


def snapshot_root(store: Path) -> Path:
    return store.parent / f".{store.name}.serve"


def remove_stale(root: Path) -> None:
    """Remove the snapshots of servers that are no longer running."""
    if not root.is_dir():
        return
    for entry in root.iterdir():
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _wal_files(store: Path) -> set[str]:
    return {p.name for p in store.glob("*.log")}


def take_snapshot(store: Path, target: Path) -> Path:
    """A consistent, private copy of ``store`` at ``target`` (which must not exist)."""
    if not (store / "CURRENT").is_file():
        raise OSError(f"no Oxigraph store at {store} (run `kgengine load` first)")
    error: OSError | None = None
    for attempt in range(ATTEMPTS):
        for leftover in (target, target.with_name(target.name + ".tmp")):
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            logs_before = _wal_files(store)
            source = ox.Store.read_only(str(store))
            try:
                source.backup(str(target))
            finally:
                del source
            # a read-only handle cannot flush, so its checkpoint lacks what is still only
            # in the write-ahead log; copying the logs lets the snapshot replay it
            for name in _wal_files(store):
                shutil.copy2(store / name, target / name)
            if not logs_before <= _wal_files(store):
                raise OSError("the store's log rotated while the snapshot was taken")
            ox.Store.read_only(str(target))  # it must open
            return target
        except OSError as exc:  # FileNotFoundError included: a file went away mid-copy
            error = exc
            time.sleep(0.05 * (attempt + 1))
    shutil.rmtree(target, ignore_errors=True)
    raise OSError(f"could not snapshot the store at {store}: {error}")


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
