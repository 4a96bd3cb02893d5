"""Readers share the store (issue 22, item 1): commands that only read never take the
store's writer lock, so they run beside each other and beside a writer; a second writer is
refused naming the process that holds the lock. Everything runs as real `kgengine`
processes on one on-disk Oxigraph store; the tests wait for states (a process holding the
lock, a query worker running), never for amounts of time."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from helpers.cli import KGENGINE
from helpers.cli import run_process as kgengine
from kgengine.oxigraph.locks import lock_holder
from test_serve_support import serve

# a cross product that runs for hours: stopped by the test (Ctrl-C)
ENDLESS = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f }"
WAIT_S = 120.0  # how long a state may take to come before the test fails (never reached)


def _as_from_a_terminal() -> None:
    # Ctrl-C as a user's shell delivers it: the child must not inherit an ignored SIGINT from
    # the test process (the full suite leaves it ignored; test_query.py does the same)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(store: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([KGENGINE, *args, "--store", str(store)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_as_from_a_terminal)


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the process ended (status {process.returncode}) before {what}: {err}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {WAIT_S} s")
        time.sleep(0.02)


def has_query_worker(process: subprocess.Popen[str]) -> bool:
    try:
        return any("kgengine.serve.worker" in " ".join(child.cmdline())
                   for child in psutil.Process(process.pid).children(recursive=True))
    except psutil.Error:
        return False


def holds_lock(store: Path, process: subprocess.Popen[str]) -> bool:
    return (lock_holder(store) or "").startswith(f"pid {process.pid} ")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    location = tmp_path_factory.mktemp("sharing") / "store"
    loaded = kgengine(location, "load", "family")
    assert loaded.returncode == 0, loaded.stderr
    yield location


def no_snapshots_left(store: Path) -> bool:
    root = store.parent / f".{store.name}.read"
    return not root.exists() or not any(root.iterdir())


def test_two_queries_at_once(store: Path) -> None:
    long_query = start(store, "query", ENDLESS)
    try:
        wait_for(lambda: has_query_worker(long_query), long_query, "query worker")
        second = kgengine(store, "query", "ASK { e:7 r:wife ?w }")
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == "true"
        assert long_query.poll() is None  # the first query was running all along
    finally:
        long_query.send_signal(signal.SIGINT)
        _, err = long_query.communicate(timeout=WAIT_S)
    assert long_query.returncode == 130 and "interrupted: query stopped" in err
    assert no_snapshots_left(store)  # each reader removes its snapshot, Ctrl-C or not


def test_readers_beside_a_long_mining_run(store: Path) -> None:
    # the query engine at length 4 mines Family for minutes: stopped once the readers ran
    miner = start(store, "mine", "--graph", "family", "--engine", "query", "--max-len", "4",
                  "--threads", "1")
    try:
        wait_for(lambda: holds_lock(store, miner) or not no_snapshots_left(store), miner,
                 "mining run in the store")
        graphs = kgengine(store, "graphs", "--json")
        stats = kgengine(store, "stats", "--graph", "family")
        query = kgengine(store, "query", "--format", "csv", "SELECT ?w WHERE { e:7 r:wife ?w }")
        groundings = kgengine(store, "groundings", "wife(?a,?b) => husband(?b,?a)", "--graph", "family",
                              "--limit", "3")
        assert miner.poll() is None  # mining all along
    finally:
        miner.kill()
        miner.communicate(timeout=WAIT_S)
    for reader in (graphs, stats, query, groundings):
        assert reader.returncode == 0, reader.stderr
    assert '"family"' in graphs.stdout
    assert stats.stdout.startswith("family: 28,356 triples")
    assert query.stdout.splitlines()[0] == "w"


def test_a_reader_beside_a_writer_and_the_second_writer_told_who_holds_the_store(
        store: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.tsv"
    with big.open("w") as out:  # enough triples that the load is still writing when read
        for n in range(600_000):
            out.write(f"n{n}\tnext\tn{n + 1}\n")
    loader = start(store, "load", "tsv", "--path", str(big), "--graph", "big")
    try:
        wait_for(lambda: holds_lock(store, loader), loader, "load holding the store")
        stats = kgengine(store, "stats", "--graph", "family")
        second_writer = kgengine(store, "drop", "family", "--yes")
        assert loader.poll() is None  # the load was writing all along
    finally:
        _, load_err = loader.communicate(timeout=10 * WAIT_S)
    assert loader.returncode == 0, load_err
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout.startswith("family: 28,356 triples")
    assert second_writer.returncode == 1
    message = second_writer.stderr.strip()
    assert "\n" not in message and "Traceback" not in message
    assert f"locked by another writer, pid {loader.pid} (kgengine load tsv" in message
    after = kgengine(store, "stats", "--graph", "big")
    assert after.returncode == 0 and after.stdout.startswith("big: 600,000 triples"), after.stderr


def test_an_updating_server_is_named_as_the_holder(store: Path, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    token.chmod(0o600)
    with serve(store, "--allow-update", "--token-file", str(token), log_dir=tmp_path) as server:
        stats = kgengine(store, "stats", "--graph", "family")
        writer = kgengine(store, "drop", "family", "--yes")
        pid = server.process.pid
    assert stats.returncode == 0 and stats.stdout.startswith("family: 28,356 triples"), stats.stderr
    message = writer.stderr.strip()
    assert writer.returncode == 1 and "\n" not in message
    assert f"locked by another writer, pid {pid} (kgengine serve --store" in message
    assert "through its query worker pid" in message
