"""Work that Ctrl-C and a timeout must be able to stop: a call waited on from the main
thread, and a job run in a worker process that is killed when it must stop.

Why: pyoxigraph evaluates a query in Rust and never looks at signals (measured: 10
CPU-minutes of a cross product ignored Ctrl-C), and a thread blocked in native code cannot
be interrupted. So the main thread only waits, where Ctrl-C (``KeyboardInterrupt``) and the
deadline are seen at once, and a worker process is killed on either.

The frame protocol of the worker processes (:mod:`kgengine.serve.worker`) lives here too:
a frame is a 4-byte big-endian length, a JSON header, then ``length`` body bytes."""

from __future__ import annotations

import contextlib
import json
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, BinaryIO, TypeVar

from kgengine.errors import KGEngineError, QueryStopped

T = TypeVar("T")
_LEN = struct.Struct(">I")


def write_frame(out: BinaryIO, header: dict[str, Any], body: bytes = b"") -> None:
    header = {**header, "length": len(body)}
    data = json.dumps(header).encode()
    out.write(_LEN.pack(len(data)) + data + body)
    out.flush()


def _read_exact(stream: IO[bytes], n: int) -> bytes | None:
    data = stream.read(n)
    return data if data is not None and len(data) == n else None


def read_frame(stream: IO[bytes]) -> dict[str, Any] | None:
    """The JSON header of the next frame (None at the end of the stream); its body, if any,
    is the next ``header["length"]`` bytes of ``stream``."""
    head = _read_exact(stream, _LEN.size)
    if head is None:
        return None
    payload = _read_exact(stream, _LEN.unpack(head)[0])
    return None if payload is None else json.loads(payload)


def stopped(timeout: float) -> QueryStopped:
    return QueryStopped(f"query stopped after {timeout:g} s (--timeout {timeout:g})")


def run_stoppable(work: Callable[[], T], timeout: float | None,
                  meanwhile: Callable[[], object] | None = None) -> T:
    """``work()`` in a daemon thread while the calling (main) thread waits: past ``timeout``
    seconds :class:`QueryStopped` is raised, and Ctrl-C raises ``KeyboardInterrupt``, both
    at once (the thread is abandoned; the caller stops what it runs). ``meanwhile()`` runs
    in the calling thread first, beside ``work``; what it raises is raised."""
    outcome: dict[str, Any] = {}
    deadline = None if timeout is None else time.monotonic() + timeout

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in the waiting thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="kgengine-stoppable", daemon=True)
    thread.start()
    if meanwhile is not None:
        meanwhile()
    while thread.is_alive():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            assert timeout is not None
            raise stopped(timeout)
        thread.join(0.1 if left is None else min(0.1, left))
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def spawn(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start a worker process (``argv``) in its own process group, so that a terminal's
    Ctrl-C reaches only this process; it may import while the caller prepares the job."""
    return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, process_group=0)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Kill the worker unless it has exited, and reap it."""
    if process.poll() is None:
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def run_job(worker: Sequence[str] | subprocess.Popen[bytes], job: dict[str, Any],
            timeout: float | None, meanwhile: Callable[[], object] | None = None
            ) -> tuple[dict[str, Any], bytes]:
    """Run ``job`` in a worker process (``argv`` to start, or one :func:`spawn` started; it
    answers with a first frame saying whether it started, then one frame per job); the
    answer's header and body. ``meanwhile()`` runs here while the worker works (what it
    raises stops the worker and is raised). The worker is killed on Ctrl-C, at the timeout,
    or when anything else goes wrong, and is gone when this returns."""
    process = worker if isinstance(worker, subprocess.Popen) else spawn(worker)
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def converse() -> tuple[dict[str, Any], bytes]:
        opened = read_frame(stdout)
        if opened is None or "error" in opened:
            raise KGEngineError((opened or {}).get("error", "the query worker did not start"))
        write_frame(stdin, job)  # type: ignore[arg-type]
        stdin.close()
        header = read_frame(stdout)
        if header is None:
            raise KGEngineError("the query worker exited without an answer")
        return header, stdout.read(header.get("length", 0))

    try:
        return run_stoppable(converse, timeout, meanwhile)
    finally:
        stop(process)
