"""Options and helpers shared by every CLI command."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
from kgengine.config import resolve_store
from kgengine.errors import InvalidParameterError
from kgengine.model import GraphInfo
from kgengine.store import KGStore, open_store
from kgengine.surface import SURFACE_CHOICES, Surface

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


# One --labels for `ask` and `eval`: the surface form of the entities the answerer sees and
# writes. `ask` maps the graph's ids through the store (labels, private ids); `eval` re-expresses
# a BRINK build through its entities.tsv. Both refuse a form the data lacks rather than fall back
# to ids silently.
LABELS_HELP = ("How entities are written in questions, prompts and answers: private (the store's "
               "seeded random ids, BRINK §5.4), dataset (the ids the data was loaded with) or text "
               "(text labels); a form the graph or BRINK build does not have is an error [default: as "
               "given: the graph's own ids, a BRINK build's as built].")


def labels_option(func: F) -> F:
    return click.option("--labels", type=click.Choice(SURFACE_CHOICES), default=None,
                        help=LABELS_HELP)(func)


def check_graph_labels(store: KGStore, graph: str, labels: Surface) -> None:
    """Refuse ``--labels text`` on a graph without any text label (Family, a BRINK build's KG in
    private ids), where every entity would silently be written by its id instead."""
    if labels == Surface.TEXT and not store.labels(graph):
        raise InvalidParameterError(f"--labels text: graph {graph!r} has no text labels (its entities "
                                    "have ids only); use --labels dataset or private")


def connect(store_location: str | None, read_only: bool = False, create: bool = False) -> KGStore:
    """The store of ``--store`` (or the configured default). Only ``kgengine load`` passes
    ``create``: every other command refuses a location that holds no store instead of
    creating one there. A command that only reads passes ``read_only``: it then never
    waits for, nor blocks, another command on the same store."""
    return open_store(resolve_store(store_location), read_only=read_only, create=create)


def warn_incomplete(infos: Iterable[GraphInfo]) -> None:
    """The warning every reading command prints for each graph it reads that is marked
    'loading' (an interrupted load, or one still running): its results are partial."""
    for info in infos:
        if not info.complete:
            click.echo(f"warning: {info.incomplete_warning()}", err=True)


def check_output_file(path: Path | None, option: str) -> None:
    """Fail before any work when the output file ``path`` (of ``option``) cannot be written:
    its folder is missing or not writable, or it is a folder itself."""
    if path is None:
        return
    if path.is_dir():
        raise InvalidParameterError(f"{option} {path} is a directory, not a file")
    folder = path.parent
    if not folder.is_dir():
        raise InvalidParameterError(f"{option} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InvalidParameterError(f"{option} {path}: not writable")


def check_output_dir(path: Path, option: str) -> None:
    """Fail before any work when the output folder ``path`` cannot be made or written: it
    is a file, lies under a file, or its nearest existing folder is not writable."""
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise InvalidParameterError(f"{option} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"{option} {path}: {existing} is not writable")


def show_progress() -> bool:
    """Progress bars on an interactive stderr only (logs stay clean in CI)."""
    return sys.stderr.isatty()
