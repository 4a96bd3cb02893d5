"""The matrix engine's index, persisted: written once per load of a graph, memory-mapped by
every later ``kgengine mine`` / ``brink build`` (or any caller of ``cached_index``) instead
of reading the graph out of the store again.

An artifact of :mod:`kgengine.artifacts` (kind ``mining``): one file per (store, graph) holds
the index's flat arrays (``KGIndex.arrays()``) and the entity names, after a JSON header that
records what it was built from: the graph's load stamp (``GraphInfo``: load time, triples,
dataset, source, splits) and the store location. The file is named by (store, graph) and the
format version, not by the stamp, so that a reload replaces the file in place instead of
leaving one big file per load behind; the stamp is checked on reading instead: a file whose
stamp differs from the graph's current one reads as broken and is never used (the graph was
replaced, dropped and reloaded, or the store is another one): it is rebuilt from the store
and rewritten. Where the file lives:

- an embedded store (a directory, Oxigraph): beside it, ``.<store name>.mining/`` (like the
  server's snapshots ``.<store name>.serve/``: the store directory itself belongs to RocksDB);
- a database server (Neo4j): the cache root's ``mining/`` folder
  (:func:`kgengine.artifacts.cache_root`: ``$KGENGINE_CACHE/mining/``, ...).

Writes are atomic (a temporary name in the same folder renamed over the target), so a process
killed while writing leaves the old file or none (the temporary is removed by the next write)
and the graph usable; readers that mapped an old file keep its pages. When the folder is not
writable the index is built in memory, as before.

Layout: ``MAGIC``, the header length (8 bytes, little-endian), the header (JSON), then each
array at a 64-byte aligned offset; the header lists name, dtype, shape and offset of each."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from kgengine.artifacts import Artifact, ArtifactCache, Cached, content_key
from kgengine.fsutil import atomic_path
from kgengine.mining.graph_index import KGIndex, build_arrays
from kgengine.store import KGStore, canonical_location, is_directory_location

MAGIC = b"KGMINIX1"
FORMAT_VERSION = 1  # bump when KGIndex.arrays() changes meaning
_ALIGN = 64
_SEPARATOR = "\x00"  # between entity names (no IRI or dataset id holds it)


def index_cache(store: KGStore) -> ArtifactCache:
    """The cache the index of a graph of ``store`` is kept in (see the module docstring)."""
    location = canonical_location(store)
    if is_directory_location(location):
        store_dir = Path(location)
        return ArtifactCache(store_dir.parent / f".{store_dir.name}.mining", kind_folders=False)
    return ArtifactCache()


def _slot(store: KGStore, graph: str) -> str:
    return content_key(canonical_location(store), graph)


def _artifact(key: dict[str, Any]) -> Artifact[KGIndex]:
    """The index file format, read back only when its header holds ``key``."""
    return Artifact("mining", FORMAT_VERSION, ".kgidx",
                    write=lambda index, path: _write_file(path, index, key),
                    read=lambda path: _read_file(path, key))


def index_path(store: KGStore, graph: str) -> Path:
    """Where the index of ``graph`` is kept (the file may not exist)."""
    return index_cache(store).path(_artifact({}), _slot(store, graph))


def stamp(store: KGStore, graph: str) -> dict[str, Any]:
    """What an index of ``graph`` must have been built from to be used (the graph must be
    complete: an interrupted load has no index)."""
    info = store.require_graph(graph, complete=True)
    return {"format": FORMAT_VERSION, "location": canonical_location(store), "graph": graph,
            "loaded_at": info.loaded_at, "triples": info.triples, "dataset": info.dataset,
            "source": info.source, "splits": list(info.splits)}


# ---- the file ---------------------------------------------------------------------------------
def write(path: Path, index: KGIndex, key: dict[str, Any]) -> None:
    """Write ``index`` under ``key`` to ``path`` atomically (temporary name, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        _write_file(temporary, index, key)


def read(path: Path, key: dict[str, Any]) -> KGIndex | None:
    """The index in ``path`` if it was written under ``key`` and is whole, else None."""
    try:
        return _read_file(path, key)
    except (OSError, ValueError):
        return None


def _write_file(path: Path, index: KGIndex, key: dict[str, Any]) -> None:
    arrays = index.arrays()
    names = _SEPARATOR.join(index.entities)
    if names.count(_SEPARATOR) != max(len(index.entities) - 1, 0):
        raise ValueError("an entity name holds NUL")  # never in an IRI; refuse rather than misread
    arrays["entity_names"] = np.frombuffer(names.encode("utf-8"), dtype=np.uint8)
    layout: dict[str, dict[str, Any]] = {}
    offset = 0
    for name, array in arrays.items():
        layout[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        offset = _aligned(offset + array.nbytes)
    header = json.dumps({"key": key, "relations": index.relations, "entities": len(index.entities),
                         "arrays": layout}).encode("utf-8")
    start = _aligned(len(MAGIC) + 8 + len(header))
    with path.open("wb") as out:
        out.write(MAGIC + struct.pack("<Q", len(header)) + header)
        for name, array in arrays.items():
            out.seek(start + layout[name]["offset"])
            out.write(np.ascontiguousarray(array).data)
        out.truncate(start + offset)
        out.flush()
        os.fsync(out.fileno())


def _read_file(path: Path, key: dict[str, Any]) -> KGIndex:
    """The index in ``path``, written under ``key``; ValueError when it was written under
    another key or is not whole. The arrays are mapped, not read: pages come from the page
    cache as the miner touches them."""
    with path.open("rb") as fh:
        head = fh.read(len(MAGIC) + 8)
        if len(head) < len(MAGIC) + 8 or head[: len(MAGIC)] != MAGIC:
            raise ValueError(f"{path}: not a mining index")
        (length,) = struct.unpack("<Q", head[len(MAGIC):])
        header = json.loads(fh.read(length).decode("utf-8"))
        size = os.fstat(fh.fileno()).st_size
    if header.get("key") != key:
        raise ValueError(f"{path}: the index of another load of the graph")
    start = _aligned(len(MAGIC) + 8 + length)
    layout = header["arrays"]
    ends = [start + spec["offset"] + np.dtype(spec["dtype"]).itemsize * int(np.prod(spec["shape"]))
            for spec in layout.values()]
    if max(ends, default=start) > size:
        raise ValueError(f"{path}: truncated")  # never by our writer: a copy cut short, a full disk
    # a plain view of the map: slicing a np.memmap costs ~20 µs a slice, and the index takes
    # thousands of slices (one per relation and array)
    whole = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)
    arrays = {}
    for name, spec in layout.items():
        dtype = np.dtype(spec["dtype"])
        count = int(np.prod(spec["shape"]))
        begin = start + spec["offset"]
        arrays[name] = whole[begin : begin + dtype.itemsize * count].view(dtype).reshape(spec["shape"])
    blob = arrays.pop("entity_names")
    count = int(header["entities"])

    def entities() -> list[str]:
        names = bytes(blob).decode("utf-8")
        return names.split(_SEPARATOR) if count else []

    index = KGIndex.from_arrays(arrays, header["relations"], entities)
    index.mapped_from = path
    return index


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


# ---- what callers use ---------------------------------------------------------------------------
def load_index(store: KGStore, graph: str) -> KGIndex | None:
    """The persisted index of ``graph`` when it is current, else None."""
    return index_cache(store).load(_artifact(stamp(store, graph)), _slot(store, graph))


def _cached(store: KGStore, graph: str, on_read: Callable[[int], None] | None, *,
            unsaved_ok: bool) -> Cached[KGIndex]:
    key = stamp(store, graph)  # before reading: a load that completes meanwhile changes it

    def build() -> KGIndex:
        entities, relations, arrays = build_arrays(store.triples(graph), on_read)
        return KGIndex.from_arrays(arrays, relations, entities)

    return index_cache(store).load_or_build(_artifact(key), _slot(store, graph), build, unsaved_ok=unsaved_ok)


def cached_index(store: KGStore, graph: str, on_read: Callable[[int], None] | None = None) -> KGIndex:
    """The index of ``graph``: mapped from its file when that was written for the graph's
    current load, else built from the store and written for the next caller (a place that
    cannot be written, a full disk: kept in memory only)."""
    return _cached(store, graph, on_read, unsaved_ok=True).value


def write_after_load(store: KGStore, graph: str) -> Path | None:
    """Build and write the index of a graph just loaded (``kgengine load``); None when there
    is nothing to write (an empty graph) or nowhere to write it. A failure here never fails
    the load: ``mine`` builds the index itself when it finds none."""
    info = store.graph_info(graph)
    if info is None or info.status != "complete" or info.triples == 0:
        return None
    if os.environ.get("KGENGINE_MINING_INDEX", "").lower() in ("0", "off", "no", "false"):
        return None
    cached = _cached(store, graph, None, unsaved_ok=True)
    return cached.path if cached.saved else None
