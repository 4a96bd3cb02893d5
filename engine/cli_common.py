"""Options and helpers shared by every CLI command."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from kgengine.config import resolve_store
from kgengine.store import KGStore, open_store

F = TypeVar("F", bound=Callable[..., Any])


def store_option(func: F) -> F:
    return click.option(
        "--store",
        "store_location",
        default=None,
        metavar="DIR|URI",
        help="Store directory (Oxigraph) or neo4j:// / bolt:// URI "
        "[default: $KGENGINE_STORE, the config file, or the per-user data dir].",
    )(func)


def graph_option(required: bool = False, default: str | None = None) -> Callable[[F], F]:
    return click.option(
        "--graph", "graph", required=required, default=default, help="Named graph (dataset variant)."
    )


def connect(store_location: str | None, read_only: bool = False) -> KGStore:
    return open_store(resolve_store(store_location), read_only=read_only)


def show_progress() -> bool:
    """Progress bars on an interactive stderr only (logs stay clean in CI)."""
    return sys.stderr.isatty()
