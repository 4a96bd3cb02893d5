"""A pool of query worker processes, driven from the event loop.

Each job goes to an idle worker over its pipes; the event loop only waits on the pipe, so
it never blocks. One watchdog task looks at the running jobs a few times a second: a job
past its timeout (or over the memory limit, or whose client went away) gets its worker
killed with SIGKILL, which is the one way to stop a pyoxigraph query (signals are not seen
while Rust evaluates: measured); a fresh worker is started in the background to take its
place. Busy workers are never shared, so a runaway query costs one worker for at most the
timeout and nobody else's query waits behind it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
import subprocess
import sys
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import psutil

log = logging.getLogger("kgengine.serve")

_LEN = struct.Struct(">I")
START_TIMEOUT_S = 60.0  # opening a large store read-only can take a while
WATCH_S = 0.25  # the watchdog's period: timeouts are enforced to within this
RESPAWN_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)


class PoolError(Exception):
    """A job that did not produce an answer; ``status`` is the HTTP status to send."""

    status = 503

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class Busy(PoolError):
    pass


class Stopped(PoolError):
    """The job was stopped by a limit (its worker was killed)."""


class WorkerFailed(PoolError):
    status = 500


class StartError(Exception):
    pass


class _Channel(asyncio.SubprocessProtocol):
    """The server's end of a worker's pipes: collects stdout and completes the pending
    job's future once a whole frame is in (cheaper than stream reads: one wake-up per job)."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[dict[str, Any], bytes]] = loop.create_future()
        self.exited: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) < _LEN.size:
            return
        size = _LEN.unpack_from(self.buffer)[0]
        if len(self.buffer) < _LEN.size + size:
            return
        header = json.loads(self.buffer[_LEN.size:_LEN.size + size])
        end = _LEN.size + size + header.get("length", 0)
        if len(self.buffer) < end:
            return
        body = bytes(self.buffer[_LEN.size + size:end])
        del self.buffer[:end]
        if not self.waiter.done():
            self.waiter.set_result((header, body))

    def _fail(self) -> None:
        if not self.waiter.done():
            self.waiter.set_exception(ConnectionError("query worker exited"))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._fail()

    def process_exited(self) -> None:
        self._fail()
        if not self.exited.done():
            self.exited.set_result(None)


@dataclass(eq=False)
class Worker:
    transport: asyncio.SubprocessTransport
    channel: _Channel
    generation: int
    info: psutil.Process | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        return self.transport.get_returncode() is None

    @property
    def pid(self) -> int:
        return self.transport.get_pid()

    def call(self, job: dict[str, Any]) -> asyncio.Future[tuple[dict[str, Any], bytes]]:
        """Send ``job``; the future completes with the worker's (header, body)."""
        self.channel.waiter = asyncio.get_running_loop().create_future()
        data = json.dumps(job).encode()
        stdin = cast(asyncio.WriteTransport, self.transport.get_pipe_transport(0))
        stdin.write(_LEN.pack(len(data)) + data)
        return self.channel.waiter

    def private_memory_mb(self) -> float:
        """Resident memory not backed by files (mapped store files do not count)."""
        if self.info is None:
            return 0.0
        try:
            mem = self.info.memory_info()
        except psutil.Error:
            return 0.0
        return (mem.rss - getattr(mem, "shared", 0)) / 2**20

    async def kill(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.transport.kill()
        await self.channel.exited
        self.transport.close()

    async def retire(self) -> None:
        """Let an idle worker exit on EOF; kill it if it does not go within seconds."""
        stdin = self.transport.get_pipe_transport(0)
        if stdin is not None:
            stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.channel.exited), 5.0)
        await self.kill()


@dataclass(eq=False)
class _Running:
    deadline: float
    disconnected: Callable[[], Awaitable[bool]] | None
    reason: str = ""  # set by the watchdog when it stops the job


class WorkerPool:
    def __init__(self, store: str, size: int, *, writable: bool = False, max_memory_mb: int = 0,
                 max_queue: int = 1024) -> None:
        self.store = store
        self.size = size
        self.writable = writable
        self.max_memory_mb = max_memory_mb
        self.max_queue = max_queue
        self.generation = 0
        self.counters = {"jobs": 0, "timeouts": 0, "memory_kills": 0, "disconnects": 0,
                         "crashes": 0, "busy": 0, "respawns": 0, "reloads": 0}
        self.opened_at = 0.0
        self._idle: list[Worker] = []
        self._waiters: deque[asyncio.Future[Worker]] = deque()
        self._workers: set[Worker] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running: dict[Worker, _Running] = {}
        self._alive: Counter[int] = Counter()  # live worker processes per generation
        self._closing = False

    # ---- life cycle ---------------------------------------------------------------------
    async def _spawn(self) -> Worker:
        args = [sys.executable, "-m", "kgengine.serve.worker", "--store", self.store]
        if self.writable:
            args.append("--writable")
        loop = asyncio.get_running_loop()
        transport, channel = await loop.subprocess_exec(
            _Channel, *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
        )
        worker = Worker(transport, channel, self.generation)
        generation = self.generation
        self._alive[generation] += 1
        channel.exited.add_done_callback(lambda _: self._alive.subtract([generation]))
        try:
            # the worker's first frame, unasked, says whether it opened the store
            header, _ = await asyncio.wait_for(asyncio.shield(channel.waiter), START_TIMEOUT_S)
        except (TimeoutError, ConnectionError) as exc:
            await worker.kill()
            raise StartError(f"query worker did not start ({type(exc).__name__})") from None
        except BaseException:  # cancelled (the pool is closing): leave no process behind
            worker.transport.kill()
            raise
        if "error" in header:
            await worker.kill()
            raise StartError(header["error"])
        with contextlib.suppress(psutil.Error):
            worker.info = psutil.Process(worker.pid)
        self._workers.add(worker)
        return worker

    async def start(self) -> None:
        """Start every worker; fail (and leave nothing running) if the store will not open."""
        results = await asyncio.gather(*(self._spawn() for _ in range(self.size)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for result in results:
            if isinstance(result, Worker):
                if errors:
                    await result.kill()
                else:
                    self._release(result)
        if errors:
            raise StartError(str(errors[0]))
        self.opened_at = time.time()
        self._background(self._watch())

    def _background(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _respawn(self, generation: int) -> None:
        """Start a replacement worker, retrying with backoff (a worker that cannot open the
        store now may later); give up only when the pool moves on or closes."""
        attempt = 0
        while not self._closing and generation == self.generation:
            try:
                worker = await self._spawn()
            except StartError as exc:
                delay = RESPAWN_BACKOFF_S[min(attempt, len(RESPAWN_BACKOFF_S) - 1)]
                log.error("replacement worker failed to start (%s); retrying in %.1f s", exc, delay)
                attempt += 1
                await asyncio.sleep(delay)
                continue
            self.counters["respawns"] += 1
            self._release(worker)
            return

    async def _discard(self, worker: Worker) -> None:
        """Kill a worker that may be mid-job and start its replacement."""
        self._workers.discard(worker)
        await worker.kill()
        if not self._closing:
            self._background(self._respawn(self.generation))

    def reload(self, store: str | None = None) -> int:
        """Move to freshly opened workers (of ``store``, if given): idle workers leave at
        once, busy ones when their job ends; their replacements start now. Returns the
        generation left behind (see :meth:`wait_gone`)."""
        old = self.generation
        if store is not None:
            self.store = store
        self.generation += 1
        self.counters["reloads"] += 1
        idle, self._idle = self._idle, []
        for worker in idle:
            self._workers.discard(worker)
            self._background(worker.retire())
        for _ in range(self.size):
            self._background(self._respawn(self.generation))
        self.opened_at = time.time()
        return old

    async def wait_gone(self, generation: int, limit: float) -> bool:
        """Wait (up to ``limit`` s) until no process of ``generation`` is left."""
        deadline = time.monotonic() + limit
        while self._alive[generation] > 0:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def close(self) -> None:
        self._closing = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(Busy("the server is shutting down"))
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        # a replacement still starting kills its process when cancelled: wait for that too
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(w.kill() for w in list(self._workers)), return_exceptions=True)
        self._workers.clear()
        self._idle.clear()

    # ---- jobs ---------------------------------------------------------------------------
    def _release(self, worker: Worker) -> None:
        if self._closing or worker.generation != self.generation or not worker.alive:
            self._workers.discard(worker)
            self._background(worker.retire())
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(worker)
                return
        self._idle.append(worker)

    async def _acquire(self, timeout: float) -> Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                return worker
            self._workers.discard(worker)
            self._background(self._respawn(self.generation))
        if self._closing:
            raise Busy("the server is shutting down", "closing")
        if len(self._waiters) >= self.max_queue:
            self.counters["busy"] += 1
            raise Busy(f"server busy: {len(self._waiters)} requests already waiting", "queue")
        waiter: asyncio.Future[Worker] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            # asyncio.wait does not cancel the future on timeout, so a worker handed over at
            # the last moment is seen (and given back) instead of being lost
            await asyncio.wait({waiter}, timeout=timeout)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release(waiter.result())
            waiter.cancel()
            raise
        if not waiter.done():
            waiter.cancel()
            self.counters["busy"] += 1
            raise Busy(f"server busy: no query worker became free within {timeout:g} s", "queue")
        return waiter.result()

    async def run(
        self,
        job: dict[str, Any],
        timeout: float,
        disconnected: Callable[[], Awaitable[bool]] | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """Run ``job`` on a worker within ``timeout`` seconds of evaluation (waiting for a
        free worker has its own bound of the same length)."""
        worker = await self._acquire(timeout)
        self.counters["jobs"] += 1
        running = _Running(asyncio.get_running_loop().time() + timeout, disconnected)
        self._running[worker] = running
        try:
            result = await worker.call(job)
        except ConnectionError:  # the watchdog killed it, or it died
            await self._discard(worker)
            if running.reason:
                raise self._stopped(running.reason, timeout) from None
            self.counters["crashes"] += 1
            log.error("query worker %s died during a job (exit status %s)", worker.pid,
                      worker.transport.get_returncode())
            raise WorkerFailed("the query worker crashed; the query was not answered") from None
        except BaseException:  # cancelled from outside: a worker mid-job must not be reused
            await self._discard(worker)
            raise
        finally:
            self._running.pop(worker, None)
        self._release(worker)
        return result

    def _stopped(self, reason: str, timeout: float) -> Stopped:
        if reason == "timeout":
            self.counters["timeouts"] += 1
            return Stopped(f"query timed out after {timeout:g} s and was stopped (the server's --timeout)",
                           reason)
        if reason == "memory":
            self.counters["memory_kills"] += 1
            return Stopped(f"query stopped: it used more than {self.max_memory_mb} MiB "
                           "(the server's --max-memory)", reason)
        self.counters["disconnects"] += 1
        return Stopped("client disconnected; query stopped", reason)

    async def _watch(self) -> None:
        """Stop the jobs that are past a limit (one timer for all jobs, not one per job)."""
        loop = asyncio.get_running_loop()
        while not self._closing:
            await asyncio.sleep(WATCH_S)
            try:
                await self._check(loop.time())
            except Exception:  # the watchdog must outlive any one bad check
                log.exception("watchdog check failed")

    async def _check(self, now: float) -> None:
        for worker, running in list(self._running.items()):
            if running.reason or self._running.get(worker) is not running:
                continue  # stopped already, or it finished while an earlier check awaited
            if now >= running.deadline:
                running.reason = "timeout"
            elif self.max_memory_mb and (used := worker.private_memory_mb()) > self.max_memory_mb:
                log.warning("query worker %s uses %.0f MiB (limit %d MiB)", worker.pid, used,
                            self.max_memory_mb)
                running.reason = "memory"
            elif running.disconnected is not None and await running.disconnected():
                # the await let other jobs run: this one may have finished (a finished
                # request also reads as disconnected) and its worker moved on to another
                if self._running.get(worker) is not running:  # so kill nothing
                    continue
                running.reason = "disconnect"
            if running.reason and worker.alive:
                # the pending call then fails with ConnectionError and run() reports why
                worker.transport.kill()

    def status(self) -> dict[str, Any]:
        alive = [w for w in self._workers if w.alive and w.generation == self.generation]
        return {
            "workers": self.size,
            "alive": len(alive),
            "idle": len(self._idle),
            "waiting": sum(1 for w in self._waiters if not w.done()),
            "generation": self.generation,
            "opened_at": self.opened_at,
            **self.counters,
        }
