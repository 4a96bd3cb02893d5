"""Helpers for the ``kgengine serve`` tests: a real server process on a free loopback port.

(No tests here; the serve test modules import these.)"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
from helpers.cli import KGENGINE
from shared_data import REFERENCE

W3C = REFERENCE / "w3c-sparql11-protocol"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str  # the endpoint, http://127.0.0.1:PORT/sparql
    base: str  # http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def health(self) -> dict:
        return httpx.get(self.base + "/health", timeout=10).json()

    def reload(self) -> None:
        self.process.send_signal(signal.SIGHUP)


@contextlib.contextmanager
def serve(store: Path, *args: str, log_dir: Path, startup_s: float = 60.0) -> Iterator[Server]:
    """Run `kgengine serve --store STORE ARGS` until the block ends; fail with its log if it
    does not come up."""
    port = free_port()
    log = log_dir / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [KGENGINE, "serve", "--store", str(store), "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    server = Server(base + "/sparql", base, process, log)
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"kgengine serve exited with {process.returncode}:\n{server.log_text()}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"kgengine serve did not come up:\n{server.log_text()}")
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def worker_pids(server: Server) -> set[int]:
    return {p.pid for p in psutil.Process(server.process.pid).children(recursive=True)}
