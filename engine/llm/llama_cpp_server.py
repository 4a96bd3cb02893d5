"""llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) as kgengine
runs it, in its own process: ``python -m kgengine.llm.llama_cpp_server --model FILE --port N``.

Three things differ from the stock entry point, each for a reason:

- ``/props`` answers the context length the way llama.cpp's own ``llama-server`` does
  (``default_generation_settings.n_ctx``): llama-cpp-python reports it nowhere, and the
  client reads it from there to size prompts (any client, not only the one that started it);
- ``interrupt_requests`` is off: on, a waiting request cuts a streaming one short and the
  first client receives an unfinished reply as if it were complete;
- ``logits_all`` is off (the stock default keeps n_ctx x vocabulary floats, 400 MB at 2048
  tokens for SmolLM2, for logprobs that kgengine never asks for);
- with ``--parent-pid`` the server exits when that process is gone, so a killed run (a test
  session, ``kgengine ask`` interrupted) leaves no server behind.

Only :mod:`kgengine.llm.local` starts it; it needs the ``local-llm`` extra."""

from __future__ import annotations

import argparse
import os
import threading
import time


def _watch_parent(pid: int) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)  # the process that owns this server is gone
        except PermissionError:
            pass  # alive, owned by another user
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kgengine.llm.llama_cpp_server")
    parser.add_argument("--model", required=True, help="GGUF file")
    parser.add_argument("--model_alias", required=True, help="the name /v1/models gives")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n_ctx", type=int, required=True)
    parser.add_argument("--n_threads", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, default=None)
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        threading.Thread(target=_watch_parent, args=(args.parent_pid,), daemon=True).start()

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    server = ServerSettings(host=args.host, port=args.port, interrupt_requests=False)
    model = ModelSettings(model=args.model, model_alias=args.model_alias, n_ctx=args.n_ctx,
                          n_threads=args.n_threads, n_threads_batch=args.n_threads, logits_all=False,
                          verbose=False)
    app = create_app(server_settings=server, model_settings=[model])  # loads the model

    @app.get("/props")
    def props() -> dict[str, object]:
        return {"default_generation_settings": {"n_ctx": args.n_ctx}, "model_alias": args.model_alias,
                "model_path": args.model, "n_threads": args.n_threads}

    print(f"model loaded: {args.model_alias}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
