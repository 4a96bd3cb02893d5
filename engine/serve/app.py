"""The SPARQL 1.1 Protocol over HTTP (Starlette): request parsing, the protocol's status
codes, the service description, the HTML page and ``/health``. Every query and update runs
in the worker pool (:mod:`kgengine.serve.pool`), never in this process; a read-only server's
workers read a private snapshot of the store (:mod:`kgengine.serve.snapshot`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
import logging
import os
import signal
import stat
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pyoxigraph as ox
from kgengine import sparqltext, terms
from kgengine.errors import KGEngineError
from kgengine.serve import formats, page
from kgengine.serve.pool import PoolError, WorkerPool
from kgengine.serve.snapshot import Snapshots
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

log = logging.getLogger("kgengine.serve")
URL_HEADROOM = 64 * 1024  # a request line's path and other parameters beyond the query string


def too_long_message(limit: int) -> str:
    return (f"request URL over the server's limit of {limit:,} bytes (--max-request-bytes); "
            "send the query with POST (a form, or an application/sparql-query body)")

FORM = "application/x-www-form-urlencoded"
QUERY_TYPE = "application/sparql-query"
UPDATE_TYPE = "application/sparql-update"
MAX_FIELDS = 1000  # parameters per request: far above any real client, bounds parsing work
SD = "http://www.w3.org/ns/sparql-service-description#"
FORMATS_NS = "http://www.w3.org/ns/formats/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"




def read_token(path: Path) -> str:
    """The bearer token that updates must present (``--token-file``)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise KGEngineError(f"cannot read --token-file {path}: {exc}") from None
    if not token:
        raise KGEngineError(f"--token-file {path} is empty")
    return token


def token_file_is_shared(path: Path) -> bool:
    """Whether users other than the owner may read the token file (POSIX permissions)."""
    return os.name == "posix" and bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def default_workers() -> int:
    # two at least, so one runaway query never stalls everyone until its timeout
    return max(2, min(4, os.cpu_count() or 2))


@dataclass(frozen=True)
class Settings:
    store: str
    host: str = "127.0.0.1"
    port: int = 7878
    timeout: float = 30.0
    max_rows: int = 100_000
    max_bytes: int = 64 * 2**20
    max_request_bytes: int = 2**20
    workers: int = field(default_factory=default_workers)
    max_memory_mb: int = 2048
    allow_update: bool = False
    token: str | None = None
    allow_service: bool = False
    cors: bool = False
    token_file: str | None = None  # where ``token`` came from (re-read by extra processes)

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/sparql"


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def _parse_params(text: str) -> dict[str, list[str]]:
    try:
        pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict",
                          max_num_fields=MAX_FIELDS)
    except UnicodeDecodeError:
        raise HTTPError(400, "request parameters are not valid UTF-8") from None
    except ValueError as exc:
        raise HTTPError(400, f"bad request parameters: {exc}") from None
    params: dict[str, list[str]] = {}
    for key, value in pairs:
        params.setdefault(key, []).append(value)
    return params


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPError(400, f"{what} is not valid UTF-8") from None


def _single(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise HTTPError(400, f"more than one '{name}' parameter (the protocol allows exactly one)")
    return values[0]


def _content_type(header: str | None) -> tuple[str, str | None]:
    if not header:
        return "", None
    media, *rest = header.split(";")
    charset = None
    for param in rest:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    return media.strip().lower(), charset


def graph_iris(values: list[str], name: str) -> list[str]:
    """Protocol graph parameters as IRIs; a bare name (no scheme) means a kgengine graph."""
    out = []
    for value in values:
        iri = value if ":" in value else terms.graph_iri(value)
        try:
            ox.NamedNode(iri)
        except ValueError as exc:
            raise HTTPError(400, f"{name}={value!r} is not a valid IRI: {exc}") from None
        out.append(iri)
    return out


def _excerpt(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


class SparqlService:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # RocksDB admits one writer process: with updates on, that one worker does everything
        size = 1 if settings.allow_update else settings.workers
        self.pool = WorkerPool(settings.store, size, writable=settings.allow_update,
                               max_memory_mb=settings.max_memory_mb)
        self.started = time.time()
        # read-only serving reads a private snapshot, never the live store (see .snapshot);
        # with updates on, the one writer process owns the live store and its lock
        self.snapshots: Snapshots | None = None
        self.snapshot: Path | None = None
        self.snapshot_taken_at = 0.0
        self._reload_task: asyncio.Future[None] | None = None

    # ---- request parsing ----------------------------------------------------------------
    async def _body(self, request: Request) -> bytes:
        limit = self.settings.max_request_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise HTTPError(413, f"request body over the server's limit of {limit} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HTTPError(413, f"request body over the server's limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _operation(self, request: Request) -> tuple[str, str | None, dict[str, list[str]]]:
        """``(kind, text, params)``: kind is "query", "update" or "describe" (no operation)."""
        raw = request.scope.get("query_string", b"")
        if len(raw) > self.settings.max_request_bytes:
            raise HTTPError(414, too_long_message(self.settings.max_request_bytes))
        params = _parse_params(_decode(raw, "the request URL"))
        if request.method in ("GET", "HEAD"):
            if "update" in params:
                raise HTTPError(400, "SPARQL Update must be sent with POST")
            query = _single(params, "query")
            return ("describe", None, params) if query is None else ("query", query, params)
        media, charset = _content_type(request.headers.get("content-type"))
        if media not in (FORM, QUERY_TYPE, UPDATE_TYPE):
            raise HTTPError(415, f"POST needs Content-Type {FORM}, {QUERY_TYPE} or {UPDATE_TYPE}")
        if charset not in (None, "utf-8", "utf8"):
            raise HTTPError(415, f"charset {charset!r} is not supported; send UTF-8")
        body = await self._body(request)
        if media == FORM:
            for key, values in _parse_params(_decode(body, "the request body")).items():
                params.setdefault(key, []).extend(values)
            query, update = _single(params, "query"), _single(params, "update")
            if query is not None and update is not None:
                raise HTTPError(400, "a request carries either 'query' or 'update', not both")
            if query is None and update is None:
                raise HTTPError(400, "the form has neither a 'query' nor an 'update' parameter")
            return ("query", query, params) if query is not None else ("update", update, params)
        if "query" in params or "update" in params:
            raise HTTPError(400, "the operation is in the body; it cannot also be a URL parameter")
        text = _decode(body, "the request body")
        return ("query" if media == QUERY_TYPE else "update"), text, params

    # ---- endpoints ----------------------------------------------------------------------
    async def sparql(self, request: Request) -> Response:
        try:
            kind, text, params = await self._operation(request)
            if kind == "describe":
                return await self.describe(request)
            assert text is not None
            job = self._update_job(request, text, params) if kind == "update" else self._query_job(
                request, text, params)
            graph = request.path_params.get("graph")
            warning = None
            if graph is not None:
                warning = await self._graph_dataset(job, graph, params)
            try:
                header, body = await self.pool.run(job, self.settings.timeout, request.is_disconnected)
            except PoolError as exc:
                log.warning("%s %s: %s", kind, exc.reason or "refused", _excerpt(text))
                raise HTTPError(exc.status, str(exc)) from None
            response = self._response(header, body)
            if warning is not None:  # RFC 7234's Warning, 199: a miscellaneous warning
                response.headers["Warning"] = f'199 kgengine "{warning}"'
            return response
        except HTTPError as exc:
            return PlainTextResponse(str(exc) + "\n", exc.status, headers=exc.headers)

    async def _graph_dataset(self, job: dict[str, Any], graph: str,
                             params: dict[str, list[str]]) -> str | None:
        """The per-graph endpoint /graph/NAME/sparql: the default graph is NAME's facts (no
        duplicates from other graphs, no labels in counts), its companion graph is the named
        graph ``labels:``; protocol dataset parameters still replace this (SPARQL Protocol).
        Returns the warning for a graph marked 'loading' (its results are partial)."""
        try:
            header, body = await self.pool.run({"kind": "graph_iris", "graph": graph}, self.settings.timeout)
        except PoolError as exc:
            raise HTTPError(exc.status, str(exc)) from None
        if header.get("status") != 200:
            raise HTTPError(header.get("status", 500), header.get("error", "error") + " (`kgengine graphs` "
                            "lists the graphs)")
        iri, companion = json.loads(body)
        job["prefixes"] = sparqltext.graph_prefixes(iri, companion)
        if job["kind"] == "query" and "default_graphs" not in job:
            job["default_graphs"], job["named_graphs"] = [iri], [iri, companion]
        elif job["kind"] == "update" and not job["using_graphs"] and not job["using_named_graphs"]:
            job["using_graphs"], job["using_named_graphs"] = [iri], [iri, companion]
        if header.get("complete", True):
            return None
        return (f"graph {graph!r} is incomplete (its load was interrupted or is still running): "
                "results are those of a partial graph")

    def _query_job(self, request: Request, text: str, params: dict[str, list[str]]) -> dict[str, Any]:
        if "using-graph-uri" in params or "using-named-graph-uri" in params:
            raise HTTPError(400, "using-graph-uri/using-named-graph-uri apply to updates; "
                                 "a query takes default-graph-uri/named-graph-uri")
        job: dict[str, Any] = {
            "kind": "query", "query": text, "accept": request.headers.get("accept"),
            "max_rows": self.settings.max_rows, "max_bytes": self.settings.max_bytes,
            "base": self.settings.endpoint, "allow_service": self.settings.allow_service,
            "prefixes": sparqltext.PREFIXES,
        }
        if "default-graph-uri" in params or "named-graph-uri" in params:
            job["default_graphs"] = graph_iris(params.get("default-graph-uri", []), "default-graph-uri")
            job["named_graphs"] = graph_iris(params.get("named-graph-uri", []), "named-graph-uri")
        return job

    def _update_job(self, request: Request, text: str, params: dict[str, list[str]]) -> dict[str, Any]:
        if not self.settings.allow_update:
            raise HTTPError(403, "SPARQL Update is disabled: this server is read-only "
                                 "(start it with --allow-update --token-file FILE)")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        expected = (self.settings.token or "").encode()
        given = token.strip().encode()
        if scheme.lower() != "bearer" or not expected or not hmac.compare_digest(given, expected):
            raise HTTPError(401, "SPARQL Update needs 'Authorization: Bearer <token>' "
                                 "with the server's token", {"WWW-Authenticate": 'Bearer realm="kgengine"'})
        if "default-graph-uri" in params or "named-graph-uri" in params:
            raise HTTPError(400, "an update takes using-graph-uri/using-named-graph-uri, "
                                 "not default-graph-uri/named-graph-uri")
        return {
            "kind": "update", "update": text, "base": self.settings.endpoint,
            "allow_service": self.settings.allow_service, "prefixes": sparqltext.PREFIXES,
            "using_graphs": graph_iris(params.get("using-graph-uri", []), "using-graph-uri"),
            "using_named_graphs": graph_iris(
                params.get("using-named-graph-uri", []), "using-named-graph-uri"),
        }

    def _response(self, header: dict[str, Any], body: bytes) -> Response:
        status = header["status"]
        if status == 204:
            return Response(status_code=204)
        if status != 200:
            return PlainTextResponse(header.get("error", "error") + "\n", status)
        headers = {"Vary": "Accept"}
        if header.get("truncated"):
            headers["X-SPARQL-Truncated"] = formats.cap_text(
                header["truncated"], self.settings.max_rows, self.settings.max_bytes)
        return Response(body, 200, headers=headers, media_type=header["type"])

    async def describe(self, request: Request) -> Response:
        """GET without a query: the HTML page for browsers, else the service description."""
        accept = request.headers.get("accept")
        if formats.prefers_html(accept):
            return self.page(request)
        try:
            header, body = await self.pool.run({"kind": "graphs"}, self.settings.timeout)
        except PoolError as exc:
            raise HTTPError(exc.status, str(exc)) from None
        named = json.loads(body) if header.get("status") == 200 else []
        offer = formats.negotiate(accept, formats.GRAPH_OFFERS)
        data = ox.serialize(self._description(named), format=formats.RDF_FORMATS[offer.fmt])
        return Response(data, 200, media_type=offer.content_type, headers={"Vary": "Accept"})

    def _description(self, named_graphs: list[str]) -> list[ox.Triple]:
        def node(local: str) -> ox.NamedNode:
            return ox.NamedNode(SD + local)

        service, dataset, default = ox.BlankNode(), ox.BlankNode(), ox.BlankNode()
        a = ox.NamedNode(RDF_TYPE)
        out = [
            ox.Triple(service, a, node("Service")),
            ox.Triple(service, node("endpoint"), ox.NamedNode(self.settings.endpoint)),
            ox.Triple(service, node("supportedLanguage"), node("SPARQL11Query")),
            ox.Triple(service, node("feature"), node("UnionDefaultGraph")),
            ox.Triple(service, node("defaultDataset"), dataset),
            ox.Triple(dataset, a, node("Dataset")),
            ox.Triple(dataset, node("defaultGraph"), default),
            ox.Triple(default, a, node("Graph")),
        ]
        if self.settings.allow_update:
            out.append(ox.Triple(service, node("supportedLanguage"), node("SPARQL11Update")))
        if self.settings.allow_service:
            out.append(ox.Triple(service, node("feature"), node("BasicFederatedQuery")))
        for name in ("SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV",
                     "SPARQL_Results_TSV", "Turtle", "N-Triples", "RDF_XML", "JSON-LD"):
            out.append(ox.Triple(service, node("resultFormat"), ox.NamedNode(FORMATS_NS + name)))
        for iri in named_graphs:
            graph = ox.BlankNode()
            out += [
                ox.Triple(dataset, node("namedGraph"), graph),
                ox.Triple(graph, a, node("NamedGraph")),
                ox.Triple(graph, node("name"), ox.NamedNode(iri)),
            ]
        return out

    def page(self, request: Request) -> Response:
        s = self.settings
        limits = (f"timeout {s.timeout:g} s, at most {s.max_rows:,} rows / {s.max_bytes:,} bytes "
                  f"per result, {'updates allowed (token)' if s.allow_update else 'read-only'}")
        return HTMLResponse(page.render(s.endpoint, limits))

    async def health(self, request: Request) -> Response:
        status = self.pool.status()
        ok = status["alive"] > 0
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "store": self.settings.store,
             "read_only": not self.settings.allow_update,
             "snapshot": str(self.snapshot) if self.snapshot else None,
             "snapshot_taken_at": self.snapshot_taken_at or None,
             "uptime_s": round(time.time() - self.started, 1),
             "timeout_s": self.settings.timeout, "max_rows": self.settings.max_rows, "pool": status},
            200 if ok else 503,
        )

    async def _take_snapshot(self) -> Path:
        assert self.snapshots is not None
        path = await asyncio.to_thread(self.snapshots.take)
        self.snapshot_taken_at = time.time()
        return path

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        if not self.settings.allow_update:
            self.snapshots = Snapshots(self.settings.store)
            self.snapshot = await self._take_snapshot()
            self.pool.store = str(self.snapshot)
        try:
            await self.pool.start()
        except BaseException:
            self._remove_snapshot(self.snapshot)
            raise
        loop = asyncio.get_running_loop()
        hup = getattr(signal, "SIGHUP", None)
        # SIGHUP reopens the store in fresh workers (to see what a writer added); signal
        # handlers can only be set from the main thread, so a server run in a thread has none
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            if hup is not None:
                loop.add_signal_handler(hup, self._reload)
        try:
            yield
        finally:
            await self.pool.close()
            self._remove_snapshot(self.snapshot)

    def _remove_snapshot(self, path: Path | None) -> None:
        if path is not None and self.snapshots is not None:
            self.snapshots.remove(path)

    def _reload(self) -> None:
        log.info("SIGHUP: serving a fresh snapshot of the store")
        self._reload_task = asyncio.ensure_future(self.refresh())

    async def refresh(self) -> None:
        """Serve the store as it is now: a new snapshot, new workers; the old snapshot goes
        once the old workers (busy ones finish their query first) have exited."""
        if self.snapshots is None:
            self.pool.reload()
            return
        try:
            new = await self._take_snapshot()
        except OSError as exc:
            log.error("reload failed, still serving the previous snapshot: %s", exc)
            return
        old, self.snapshot = self.snapshot, new
        generation = self.pool.reload(str(new))
        await self.pool.wait_gone(generation, self.settings.timeout + 30)
        self._remove_snapshot(old)


def setup_logging() -> None:
    logger = logging.getLogger("kgengine.serve")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     kgengine.serve: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


SETTINGS_ENV = "KGENGINE_SERVE_SETTINGS"


def app_from_env() -> Starlette:
    """The app factory uvicorn calls in each process of ``--http-processes N``: settings
    travel as JSON in the environment, the token stays in its file."""
    values = json.loads(os.environ[SETTINGS_ENV])
    if values.get("token_file"):
        values["token"] = Path(values["token_file"]).read_text(encoding="utf-8").strip()
    return create_app(Settings(**values))


def settings_env(settings: Settings) -> str:
    values = {k: v for k, v in dataclasses.asdict(settings).items() if k != "token"}
    return json.dumps(values)


def create_app(settings: Settings) -> Starlette:
    setup_logging()
    service = SparqlService(settings)
    routes = [
        Route("/sparql", service.sparql, methods=["GET", "POST"]),
        Route("/sparql/", service.sparql, methods=["GET", "POST"]),
        Route("/graph/{graph:str}/sparql", service.sparql, methods=["GET", "POST"]),
        Route("/", service.page, methods=["GET"]),
        Route("/health", service.health, methods=["GET"]),
    ]
    middleware = []
    if settings.cors:
        middleware.append(Middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"],
                                     allow_headers=["Accept", "Content-Type"],
                                     expose_headers=["X-SPARQL-Truncated", "Warning"]))
    app = Starlette(routes=routes, middleware=middleware, lifespan=service.lifespan)
    app.state.service = service
    return app
