"""Reader snapshots: how readers (and ``kgengine serve``) share an Oxigraph store with its writer.

A store opened with ``Store.read_only`` while another process writes to it is "undefined
behaviour" in pyoxigraph's words (0.5 has no secondary mode), and measured so: after a
writer compacted the store, a read-only handle failed with ``IO error: No such file or
directory: …/000079.sst`` on a file it had not opened yet. So a reader never reads the live
store: it takes a RocksDB checkpoint (``Store.backup``: hard links to the store's immutable
SST files plus a copy of its small metadata, milliseconds on the same file system), copies
the write-ahead logs too (data a running writer committed but has not flushed), and opens
that read-only. The writer may then compact and delete whatever it likes."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import time
from pathlib import Path

import pyoxigraph as ox
from kgengine.errors import StoreError
from kgengine.oxigraph.layout import require_store_directory

SNAPSHOT_ATTEMPTS = 20  # a checkpoint races a writer's compaction or log rotation: retry


def snapshot_root(store: Path, purpose: str) -> Path:
    """Where snapshots of ``store`` for ``purpose`` ("read": reading commands, "serve") live:
    beside the store, so that hard links work."""
    return store.parent / f".{store.name}.{purpose}"


def remove_stale(root: Path) -> None:
    """Remove the snapshots (named ``<pid>-<n>``) of processes that are no longer running."""
    if not root.is_dir():
        return
    import psutil  # here, not at the top: 70 ms of every command's start

    for entry in root.iterdir():
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _wal_files(store: Path) -> set[str]:
    return {p.name for p in store.glob("*.log")}


def take_snapshot(store: Path, target: Path) -> Path:
    """A consistent, private copy of ``store`` at ``target`` (which must not exist)."""
    _snapshot_opened(store, target)
    return target


def _snapshot_opened(store: Path, target: Path) -> ox.Store:
    """:func:`take_snapshot`, and the snapshot opened read-only (it must open)."""
    require_store_directory(store)
    error: OSError | None = None
    for attempt in range(SNAPSHOT_ATTEMPTS):
        for leftover in (target, target.with_name(target.name + ".tmp")):
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            # (again on each attempt: another reader closing removes the shared folder when empty)
            target.parent.mkdir(parents=True, exist_ok=True)
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
            return ox.Store.read_only(str(target))  # it must open
        except (OSError, RuntimeError) as exc:
            # FileNotFoundError included: a file went away mid-copy; RocksDB says "Corruption:
            # ... No such file" (a RuntimeError) when a writer's compaction removed an SST file
            # between its listing and its opening: both pass on a new attempt
            error = OSError(str(exc))
            time.sleep(0.05 * (attempt + 1))
    shutil.rmtree(target, ignore_errors=True)
    raise OSError(f"could not snapshot the store at {store}: {error}")


_reader_snapshots = itertools.count(1)  # next() on it is atomic: threads never share a snapshot name


def reader_snapshot(store: Path) -> tuple[Path, ox.Store] | None:
    """A private snapshot for one reading store object, opened, or None where nothing can
    be written beside the store (then the live store is read as it is)."""
    root = snapshot_root(store, "read")
    try:
        root.mkdir(exist_ok=True)
        remove_stale(root)
    except OSError:
        return None
    target = root / f"{os.getpid()}-{next(_reader_snapshots)}"
    try:
        return target, _snapshot_opened(store, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            root.rmdir()
        raise StoreError(f"cannot open Oxigraph store at {store} for reading: {exc}") from exc


def remove_snapshot_dir(snapshot: Path | None) -> None:
    """Remove a reader's snapshot (None: it had none), and its folder once empty."""
    if snapshot is not None:
        shutil.rmtree(snapshot, ignore_errors=True)
        with contextlib.suppress(OSError):  # leave no empty .<store>.read directory behind
            snapshot.parent.rmdir()
