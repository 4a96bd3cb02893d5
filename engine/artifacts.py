"""The one artifact cache: what kgengine computes once and keeps on disk for later runs (mined
rules, learned relation paths, learned cuts, triple embeddings, the mining index).

- **Where**: :func:`cache_root` is the one cache-directory rule: ``$KGENGINE_CACHE``, else
  ``cache = "…"`` in the config file, else the user cache directory
  (``platformdirs.user_cache_dir("kgengine")``); each kind of artifact has its folder there.
- **Key**: the caller's key comes from what the value is computed from (:func:`graph_stamp`
  of a graph, :func:`file_digest` of a training file, the settings), never from where an
  output goes: two runs that differ only in their output directory share every artifact. The
  artifact's version is mixed into the file name: bumping it retires every older file.
- **Name**: ``ROOT/KIND/{LABEL-}DIGEST{SUFFIX}``; the label is for people (a graph's name) or
  a slot whose older entries an entry replaces (``drop_other_keys``).
- **Writes** are atomic (:mod:`kgengine.fsutil`: a temporary sibling renamed over the
  target), so a process killed while writing leaves the old file or none; temporaries of
  writers that are gone are removed by the next write in the folder. Two processes building
  the same key both write a valid file: the last rename wins (a folder: the first stays).
- **Reads** that fail (ValueError, KeyError, OSError, JSON errors: a file cut short, edited
  or of another format) mean a broken file: it is removed and the value built again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import platformdirs
from kgengine.config import setting
from kgengine.fsutil import atomic_path, remove_stale_temporaries
from kgengine.model import GraphInfo
from kgengine.store import KGStore, canonical_location

T = TypeVar("T")

CACHE_ENV = "KGENGINE_CACHE"
# what an artifact's read raises on a file that is not a whole one of its format
BROKEN = (ValueError, KeyError, OSError, EOFError)


def cache_root(kind: str = "") -> Path:
    """Where kgengine caches artifacts of ``kind`` (``rules``, ``paths``, ``cuts``,
    ``embeddings``, ``llm``, ``mining``; none: the root): ``$KGENGINE_CACHE``, else the config
    file's ``cache``, else ``<user cache dir>/kgengine``; then ``/KIND``."""
    root = Path(str(setting("cache", CACHE_ENV) or platformdirs.user_cache_dir("kgengine"))).expanduser()
    return root / kind if kind else root


def content_key(*parts: str) -> str:
    """A short stable digest of ``parts``: the first 16 hex digits of the SHA-256 of the
    NUL-joined parts (order matters)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def graph_stamp(store: KGStore, graph: str, info: GraphInfo | None = None) -> str:
    """The identity of ``graph`` as loaded now: the store and the graph's load stamp (load
    time, status, triple count, dataset, source, splits; ``info``: the graph's metadata when
    the caller holds it already). Reloading the graph changes it."""
    info = info if info is not None else store.require_graph(graph)
    return content_key(canonical_location(store), graph, info.status, info.loaded_at, str(info.triples),
                       info.dataset, info.source, ",".join(info.splits))


_digests: dict[tuple[str, int, int], str] = {}
_digests_lock = threading.Lock()


def file_digest(path: Path) -> str:
    """The SHA-256 (hex) of the file's bytes: what a training split is keyed by, so that a
    copy elsewhere or a touched file keeps its artifacts. Memoised per (resolved path, size,
    modification time): a file is read once per process unless it changes."""
    resolved = Path(path).resolve()
    status = resolved.stat()
    memo = (str(resolved), status.st_size, status.st_mtime_ns)
    with _digests_lock:
        known = _digests.get(memo)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with resolved.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    with _digests_lock:
        _digests[memo] = digest.hexdigest()
    return digest.hexdigest()


@dataclass(frozen=True)
class Artifact(Generic[T]):
    """One kind of cached value and its file format. ``write`` writes a value to a path (the
    cache makes it atomic); ``read`` reads it back and raises one of :data:`BROKEN` on a file
    that is not a whole one. ``folder``: the value is a folder of files (written into a
    temporary folder that is renamed into place)."""

    kind: str  # its subfolder of the cache root: "rules", "paths", "cuts", "embeddings", "mining", ...
    version: int  # bump when the format or its meaning changes (part of the file name)
    suffix: str  # ".tsv", ".json", ... ("" for a folder)
    write: Callable[[T, Path], None]
    read: Callable[[Path], T]
    folder: bool = False


@dataclass(frozen=True)
class Cached(Generic[T]):
    """What :meth:`ArtifactCache.load_or_build` gives: the value, its file, and whether it was
    read from an earlier run (``hit``); ``saved`` is false only for a value that could not be
    written (``unsaved_ok``)."""

    value: T
    path: Path
    hit: bool
    saved: bool = True


_DIGEST = re.compile(r"[0-9a-f]{16}")


class ArtifactCache:
    """Artifacts under one root (default :func:`cache_root`), each kind in its folder
    (``kind_folders=False``: the root is the one kind's own folder, as the mining index
    beside an embedded store)."""

    def __init__(self, root: Path | None = None, *, kind_folders: bool = True) -> None:
        self.root = Path(root) if root is not None else cache_root()
        self.kind_folders = kind_folders

    def folder(self, artifact: Artifact[Any]) -> Path:
        return self.root / artifact.kind if self.kind_folders else self.root

    def path(self, artifact: Artifact[T], key: str, label: str = "") -> Path:
        """``ROOT/KIND/{LABEL-}DIGEST{SUFFIX}``, the digest of the key and the version."""
        name = content_key(key, f"v{artifact.version}")
        return self.folder(artifact) / f"{label + '-' if label else ''}{name}{artifact.suffix}"

    def load(self, artifact: Artifact[T], key: str, label: str = "") -> T | None:
        """The value cached under ``key``, or None (never built, or broken: left as it is)."""
        cached = self._hit(artifact, key, label, remove_broken=False)
        return cached.value if cached is not None else None

    def load_or_build(self, artifact: Artifact[T], key: str, build: Callable[[], T], *, label: str = "",
                      drop_other_keys: bool = False, unsaved_ok: bool = False) -> Cached[T]:
        """The value cached under ``key``, else ``build()`` written and read back (what every
        later run sees). ``drop_other_keys``: once written, entries of the same label under
        other keys (an earlier load of the graph) are removed. ``unsaved_ok``: a value that
        cannot be written (a read-only place, a full disk, a value the format refuses) is
        returned unsaved instead of failing."""
        cached = self._hit(artifact, key, label)
        if cached is not None:
            return cached
        value = build()
        try:
            return self.save(artifact, key, lambda target: artifact.write(value, target), label=label,
                             drop_other_keys=drop_other_keys)
        except (OSError, ValueError):
            if not unsaved_ok:
                raise
            return Cached(value, self.path(artifact, key, label), hit=False, saved=False)

    def load_or_write(self, artifact: Artifact[T], key: str, write: Callable[[Path], None], *,
                      label: str = "", drop_other_keys: bool = False) -> Cached[T]:
        """:meth:`load_or_build` for a value built straight into its file by ``write(path)``
        (streamed, never whole in memory: the triple embeddings)."""
        cached = self._hit(artifact, key, label)
        if cached is not None:
            return cached
        return self.save(artifact, key, write, label=label, drop_other_keys=drop_other_keys)

    def save(self, artifact: Artifact[T], key: str, write: Callable[[Path], None], *, label: str = "",
             drop_other_keys: bool = False) -> Cached[T]:
        """Write the entry of ``key`` atomically with ``write(temporary)`` and read it back."""
        path = self.path(artifact, key, label)
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path.parent)
        try:
            with atomic_path(path, folder=artifact.folder) as temporary:
                write(temporary)
        except OSError:
            if not (artifact.folder and path.is_dir()):
                raise
            # another process renamed the same entry into place first: theirs is as good
        if drop_other_keys and label:
            self._drop_others(path, label, artifact.suffix)
        return Cached(artifact.read(path), path, hit=False)

    def _hit(self, artifact: Artifact[T], key: str, label: str, remove_broken: bool = True
             ) -> Cached[T] | None:
        """The entry of ``key`` read, or None; a broken one is removed (``remove_broken``)."""
        path = self.path(artifact, key, label)
        if not path.exists():
            return None
        try:
            return Cached(artifact.read(path), path, hit=True)
        except BROKEN:
            if remove_broken:
                _remove(path)
            return None

    def invalidate(self, artifact: Artifact[Any], key: str, label: str = "") -> None:
        """Remove the entry of ``key`` (the next :meth:`load_or_build` builds it again)."""
        _remove(self.path(artifact, key, label))

    @staticmethod
    def _drop_others(path: Path, label: str, suffix: str) -> None:
        for other in path.parent.glob(f"{glob_escape(label)}-*{glob_escape(suffix)}"):
            digest = other.name[len(label) + 1: len(other.name) - len(suffix)]
            if other != path and _DIGEST.fullmatch(digest):
                _remove(other)


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
