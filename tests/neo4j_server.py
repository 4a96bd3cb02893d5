"""pytest plugin (registered in conftest.py): a real Neo4j server for the tests marked
``neo4j``, started once per test session, in this order of preference:

1. ``$NEO4J_URI`` (with ``$NEO4J_USER`` / ``$NEO4J_PASSWORD``): a server you run yourself;
   the tests only touch graphs named ``kgtest-*`` and drop them at the end.
2. a testcontainers Neo4j container (image ``neo4j:<NEO4J_VERSION>-community``, or
   ``$NEO4J_IMAGE``) when a Docker engine answers within a few seconds;
3. an embedded Neo4j Community of the same version, from Maven Central jars, started by
   ``tests/neo4j_launcher/Launcher.java`` (javac-compiled against the classpath Maven
   resolves into ~/.m2) on a free localhost port, and stopped at the end of the session.

``python tests/neo4j_server.py prepare`` resolves the jars and compiles the launcher (what
``make neo4j-jars`` runs; the fixture does it too when needed)."""

from __future__ import annotations

import os
import queue
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

LAUNCHER_DIR = Path(__file__).resolve().parent / "neo4j_launcher"
POM = LAUNCHER_DIR / "pom.xml"
SOURCE = LAUNCHER_DIR / "Launcher.java"
TARGET = LAUNCHER_DIR / "target"
CLASSPATH_FILE = TARGET / "classpath.txt"
CLASSES = TARGET / "classes"
# the pom is the one place the version is written
NEO4J_VERSION = re.search(r"<neo4j\.version>([^<]+)</neo4j\.version>", POM.read_text()).group(1)
NEO4J_IMAGE = os.environ.get("NEO4J_IMAGE", f"neo4j:{NEO4J_VERSION}-community")
START_TIMEOUT = 240.0  # seconds: a cold JVM on 2 busy cores needs ~20 s; leave headroom
# Small memory settings: CI has 2 cores / 24 GiB shared with the tests themselves. Failed
# logins never lock the user out (the auth-error tests must not break the others).
LAUNCHER_CONF = """\
server.memory.pagecache.size=256m
db.memory.transaction.total.max=1g
db.tx_log.rotation.retention_policy=false
dbms.security.auth_max_failed_attempts=0
"""
JAVA_OPTIONS = ["-Xms256m", "-Xmx1g", "-XX:+ExitOnOutOfMemoryError"]


@dataclass(frozen=True)
class Neo4jServer:
    uri: str
    user: str
    password: str
    origin: str  # "NEO4J_URI", "docker" or "launcher"
    prefix: str  # graph names this session may create (and drops at the end)

    @property
    def auth(self) -> tuple[str, str]:
        return self.user, self.password

    def store(self, **options: Any) -> Any:
        from kgengine.neo4j_store import Neo4jStore

        return Neo4jStore(self.uri, auth=self.auth, **options)

    def graph(self, name: str) -> str:
        return self.prefix + name


# ---- the embedded server from Maven Central ---------------------------------------------
def _stale(path: Path, *sources: Path) -> bool:
    return not path.exists() or any(s.stat().st_mtime > path.stat().st_mtime for s in sources)


def _classpath_ok() -> bool:
    if _stale(CLASSPATH_FILE, POM):
        return False
    entries = CLASSPATH_FILE.read_text().strip().split(os.pathsep)
    return bool(entries) and all(Path(e).is_file() for e in entries)  # ~/.m2 may be gone


def prepare() -> str:
    """Resolve the Neo4j jars (cached in ~/.m2, so a rerun is offline and quick) and compile
    the launcher; the classpath to start it with."""
    for tool in ("mvn", "javac", "java"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"`{tool}` not found: the embedded Neo4j needs a JDK 17+ and Maven")
    if not _classpath_ok():
        subprocess.run(
            ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(POM), "dependency:build-classpath"],
            check=True, stdin=subprocess.DEVNULL,
        )
    classpath = CLASSPATH_FILE.read_text().strip()
    if _stale(CLASSES / "Launcher.class", SOURCE, CLASSPATH_FILE):
        CLASSES.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-nowarn", "-d", str(CLASSES), "-cp", classpath, str(SOURCE)],
            check=True, stdin=subprocess.DEVNULL,
        )
    return str(CLASSES) + os.pathsep + classpath


class LauncherProcess:
    """The Java launcher as a child process: ready when it prints its Bolt URI, stopped by
    closing its stdin (so it also stops if this process dies)."""

    def __init__(self, classpath: str, password: str) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="kgengine-neo4j-"))
        conf = self.home / "neo4j.conf"
        conf.write_text(LAUNCHER_CONF)
        self.log = self.home / "launcher.log"
        self._log_fh = self.log.open("w")
        self.process = subprocess.Popen(
            ["java", *JAVA_OPTIONS, "-cp", classpath, "Launcher", str(self.home / "db"), password, str(conf)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_fh, text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise RuntimeError(f"the Neo4j launcher exited ({self.process.wait()}):\n{self.log_tail()}")
            if line.startswith("NEO4J_READY "):
                return line.split()[1]
        self.stop()
        raise RuntimeError(f"the Neo4j launcher was not ready within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        self._log_fh.flush()
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the launcher shuts Neo4j down cleanly on EOF
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_fh.close()
        shutil.rmtree(self.home, ignore_errors=True)


# ---- choosing the source ------------------------------------------------------------------
def docker_answers(timeout: float = 3.0) -> bool:
    """A Docker engine that answers a ping quickly (never hangs on a dead socket)."""
    host = os.environ.get("DOCKER_HOST")
    if not host and not Path("/var/run/docker.sock").exists():
        return False
    try:
        import docker

        client = docker.from_env(timeout=int(max(timeout, 1)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


@contextmanager
def bench_server(uri: str | None) -> Iterator[tuple[str, tuple[str, str] | None, str]]:
    """For the benchmarks: (uri, auth or None for the environment's, description) of the
    server at ``uri``, or of an embedded one started for the run."""
    if uri:
        yield uri, None, "given server"
        return
    password = "kg-" + secrets.token_hex(8)
    launcher = LauncherProcess(prepare(), password)
    try:
        yield launcher.wait_ready(), ("neo4j", password), f"embedded Neo4j {NEO4J_VERSION} Community"
    finally:
        launcher.stop()


@contextmanager
def _server() -> Iterator[tuple[str, str, str, str]]:
    """(uri, user, password, origin) of the first source that works."""
    uri = os.environ.get("NEO4J_URI")
    if uri:
        yield uri, os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", ""), "NEO4J_URI"
        return
    password = "kg-" + secrets.token_hex(8)  # Neo4j wants at least 8 characters
    if docker_answers():
        from testcontainers.community.neo4j import Neo4jContainer

        with Neo4jContainer(NEO4J_IMAGE, password=password) as container:
            yield container.get_connection_url(), "neo4j", password, "docker"
        return
    launcher = LauncherProcess(prepare(), password)
    try:
        yield launcher.wait_ready(), "neo4j", password, "launcher"
    finally:
        launcher.stop()


def _drop_test_graphs(server: Neo4jServer) -> None:
    with server.store() as store:
        for info in store.graphs():
            if info.name.startswith(server.prefix):
                store.drop(info.name)


@pytest.fixture(scope="session")
def neo4j_server() -> Iterator[Neo4jServer]:
    started = time.monotonic()
    try:
        with _server() as (uri, user, password, origin):
            # a per-session prefix: two runs sharing one $NEO4J_URI server never collide
            server = Neo4jServer(uri, user, password, origin, f"kgtest-{os.getpid()}-")
            took = time.monotonic() - started
            sys.stderr.write(f"\n[neo4j] {origin} server at {uri}, up in {took:.1f} s\n")
            try:
                yield server
            finally:
                if origin == "NEO4J_URI":
                    _drop_test_graphs(server)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"could not start a Neo4j server for the tests: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def neo4j_uri(neo4j_server: Neo4jServer) -> str:
    return neo4j_server.uri


@pytest.fixture(scope="session")
def neo4j_auth(neo4j_server: Neo4jServer) -> tuple[str, str]:
    return neo4j_server.auth


@pytest.fixture(scope="session")
def neo4j_store(neo4j_server: Neo4jServer) -> Iterator[Any]:
    """One connection for the session (graphs named ``neo4j_server.graph(name)``)."""
    store = neo4j_server.store()
    yield store
    store.close()


if __name__ == "__main__":
    if sys.argv[1:] != ["prepare"]:
        sys.exit("usage: python tests/neo4j_server.py prepare")
    if not os.environ.get("NEO4J_URI"):  # a server of one's own needs no jars
        prepare()
