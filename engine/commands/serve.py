"""``kgengine serve``: run the SPARQL endpoint (uvicorn) over an Oxigraph store."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import click
from kgengine.config import resolve_store
from kgengine.errors import KGEngineError
from kgengine.net import is_loopback
from kgengine.serve.app import (
    SETTINGS_ENV,
    URL_HEADROOM,
    Settings,
    create_app,
    default_workers,
    read_token,
    settings_env,
    token_file_is_shared,
)
from kgengine.store import check_store_location, is_directory_location

if TYPE_CHECKING:
    import asyncio

    from starlette.applications import Starlette

NO_NEO4J = ("kgengine serve needs an Oxigraph store directory, not a Neo4j URI: it serves SPARQL, and "
            "SPARQL over Neo4j's property graph is out of scope (query Neo4j with `kgengine query --cypher` "
            "or Neo4j's own endpoints)")


@click.command()
@click.option("--store", "store_location", default=None, metavar="DIR",
              help="Oxigraph store directory (serve needs an Oxigraph store; Neo4j URIs are refused: "
                   "SPARQL over a property graph is out of scope) [default: $KGENGINE_STORE, the "
                   "config file, or the per-user data dir].")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback exposes the store to the network.")
@click.option("--port", default=7878, show_default=True, type=click.IntRange(0, 65535))
@click.option("--timeout", "timeout", default=30.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds a query may run; then its worker process is killed (503).")
@click.option("--max-rows", default=100_000, show_default=True, type=click.IntRange(min=1),
              help="Result rows (or triples) returned at most; more are cut (X-SPARQL-Truncated).")
@click.option("--max-bytes", default=64 * 2**20, show_default=True, type=click.IntRange(min=1024),
              help="Result bytes returned at most, cut at a row boundary.")
@click.option("--max-request-bytes", default=2**20, show_default=True, type=click.IntRange(min=1024),
              help="Largest accepted request body or query string (413/414 beyond).")
@click.option("--workers", default=default_workers(), show_default=True, type=click.IntRange(min=1),
              help="Query worker processes (queries running at once).")
@click.option("--http-processes", default=1, show_default=True, type=click.IntRange(min=1),
              help="HTTP server processes, each with its own --workers (for many-core machines).")
@click.option("--max-memory", "max_memory_mb", default=2048, show_default=True, type=click.IntRange(min=0),
              help="MiB of private memory a worker may use for one query (0: no limit).")
@click.option("--allow-update", is_flag=True,
              help="Accept SPARQL Update (needs --token-file; the server then holds the store lock).")
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="File holding the bearer token that updates must present.")
@click.option("--allow-service", is_flag=True,
              help="Allow SERVICE and LOAD, which make the server fetch from other hosts.")
@click.option("--cors", is_flag=True, help="Allow cross-origin requests (browser clients on other sites).")
@click.option("--access-log", is_flag=True, help="Log every request.")
def serve(store_location: str | None, host: str, port: int, timeout: float, max_rows: int,
          max_bytes: int, max_request_bytes: int, workers: int, http_processes: int, max_memory_mb: int,
          allow_update: bool, token_file: Path | None, allow_service: bool, cors: bool,
          access_log: bool) -> None:
    """Serve the store over the SPARQL 1.1 Protocol (read-only unless --allow-update).

    Queries run in worker processes, each stopped at --timeout. A read-only server answers
    from a snapshot of the store taken at start (hard links, beside the store), so
    `kgengine load` and other commands may write to the store while it is served; SIGHUP
    (or a restart) serves the store as it is then. With --allow-update the server is the
    store's one writer and other writers are refused until it stops.

    /sparql's default graph is the union of every graph (labels and private ids included);
    /graph/NAME/sparql serves one graph: its facts as the default graph, its labels as the
    named graph labels:. Prefixes e:, r:, g:, kg:, rdf:, rdfs:, xsd: are predeclared
    (docs/serve.md). Serving needs an Oxigraph store: SPARQL over Neo4j is out of scope."""
    import uvicorn

    location = resolve_store(store_location)
    if not is_directory_location(location):
        raise KGEngineError(NO_NEO4J)
    if allow_update and token_file is None:
        raise KGEngineError("--allow-update needs --token-file: updates are only taken with its token")
    if allow_update and http_processes > 1:
        raise KGEngineError("--allow-update runs one writer process; it cannot be used with --http-processes")
    check_store_location(location, create=False)  # serving never creates a store
    token = read_token(token_file) if token_file is not None else None
    if token_file is not None and token_file_is_shared(token_file):
        click.echo(f"warning: {token_file} is readable by other users; chmod 600 it", err=True)
    if not is_loopback(host):
        click.echo(f"warning: binding {host}: the endpoint is reachable from the network"
                   + (" and accepts updates from anyone holding the token" if allow_update else ""),
                   err=True)
    settings = Settings(
        store=str(Path(location).resolve()), host=host, port=port, timeout=timeout, max_rows=max_rows,
        max_bytes=max_bytes, max_request_bytes=max_request_bytes, workers=workers,
        max_memory_mb=max_memory_mb, allow_update=allow_update, token=token,
        allow_service=allow_service, cors=cors,
        token_file=str(token_file.resolve()) if token_file is not None else None,
    )
    sock = bind(host, port)  # before the banner: a busy port is the one line the user sees
    mode = "read-write (updates with token)" if allow_update else "read-only"
    click.echo(f"kgengine serve: {settings.endpoint} — store {settings.store}, {mode}, "
               f"{http_processes} HTTP process(es) x {1 if allow_update else workers} query worker(s), "
               f"timeout {timeout:g} s", err=True)

    def config(app: Starlette | str, *, factory: bool = False,
               processes: int | None = None) -> uvicorn.Config:
        return uvicorn.Config(
            app, factory=factory, workers=processes, host=host, port=port, lifespan="on",
            access_log=access_log, log_level="info", server_header=False,
            proxy_headers=False,  # no proxy is trusted by default; client addresses are only logged
            # the bound on the request line (h11's, and ours for httptools: kgengine.serve.http);
            # room for a GET query up to the limit, which the application then answers (414 beyond)
            h11_max_incomplete_event_size=max_request_bytes + URL_HEADROOM,
            http=http_protocol(),
        )

    if http_processes == 1:
        uvicorn.Server(config(create_app(settings))).run(sockets=[sock])
    else:
        # uvicorn's supervisor spawns the processes (each runs its own uvicorn.Server); each
        # builds its app (and worker pool) from the environment, and SIGHUP restarts them all
        # (the store is reopened)
        from uvicorn.supervisors import Multiprocess

        os.environ[SETTINGS_ENV] = settings_env(settings)
        Multiprocess(config("kgengine.serve.app:app_from_env", factory=True, processes=http_processes),
                     sockets=[sock]).run()


def http_protocol() -> type[asyncio.Protocol] | str:
    """uvicorn's HTTP protocol: httptools (C) with kgengine's URL fixes, else h11."""
    try:
        from kgengine.serve.http import KGHttpToolsProtocol
    except ImportError:  # httptools is not installed
        return "h11"
    return KGHttpToolsProtocol


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound now so that a busy port fails in one line, before
    anything else is printed or started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "the port is in use (another server?)" if exc.errno == errno.EADDRINUSE else (
            exc.strerror or str(exc))
        raise KGEngineError(f"cannot listen on {host}:{port}: {reason}; choose another --port") from None
    sock.set_inheritable(True)
    return sock
