"""Who holds an Oxigraph store's writer lock, so that a refused writer can name it.

RocksDB takes a POSIX lock on the store's ``LOCK`` file; the kernel's table of file locks
(``/proc/locks``) says which process holds it."""

from __future__ import annotations

from pathlib import Path

from kgengine.errors import StoreLockedError


def locked_error(store: Path) -> StoreLockedError:
    """The error for a second writer: which process holds the lock, and what runs meanwhile."""
    holder = lock_holder(store) or "another process"
    return StoreLockedError(
        f"the store {store} is locked by another writer, {holder}: wait for it to finish "
        "(commands that only read, such as query, graphs and stats, run meanwhile)"
    )


def lock_holder(store: Path) -> str | None:
    """The process that holds the store's RocksDB lock (``LOCK``), as "pid N (command
    line)", from the kernel's table of file locks; None where that cannot be told."""
    import psutil

    try:
        lock = (store / "LOCK").stat()
        with open("/proc/locks", encoding="ascii") as table:
            entries = table.read().splitlines()
    except OSError:
        return None
    for entry in entries:
        fields = entry.split()
        # "1: POSIX  ADVISORY  WRITE 4242 08:01:131 0 EOF" (blocked waiters start "-> ")
        if len(fields) < 6 or fields[1] == "->" or not fields[4].lstrip("-").isdigit():
            continue
        device_inode = fields[5].split(":")
        if len(device_inode) == 3 and device_inode[2] == str(lock.st_ino):
            pid = int(fields[4])
            if pid <= 0:
                return "another process"
            try:
                process = psutil.Process(pid)
                argv = process.cmdline()
                if "kgengine.serve.worker" in argv and (parent := process.parent()) is not None:
                    # an --allow-update server's writer worker: the server is what to name
                    return f"{_describe(parent.pid, parent.cmdline())}, through its query worker pid {pid}"
            except psutil.Error:
                return f"pid {pid}"
            return _describe(pid, argv)
    return None


def _describe(pid: int, argv: list[str]) -> str:
    """"pid N (command line)", the command as typed ("kgengine mine …", not the interpreter)."""
    if len(argv) > 1 and Path(argv[0]).name.startswith("python") and not argv[1].startswith("-"):
        argv = argv[1:]  # "python …/bin/kgengine mine …": the script is what says it
    command = " ".join([Path(argv[0]).name, *argv[1:]]) if argv else ""
    if len(command) > 160:
        command = command[:157] + "..."
    return f"pid {pid} ({command})" if command else f"pid {pid}"
