"""Dataset readers, registered by name (pykeen-style registry)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgengine.errors import KGEngineError
from kgengine.loaders.base import Dataset, DelimitedTriples, LoaderFn
from kgengine.loaders.family import read_family

LOADERS: dict[str, LoaderFn] = {
    "family": read_family,
}


def read_dataset(name: str, path: Path | None = None, splits: Sequence[str] | None = None) -> Dataset:
    try:
        reader = LOADERS[name]
    except KeyError:
        raise KGEngineError(
            f"unknown dataset {name!r}; known: {', '.join(sorted(LOADERS))}"
        ) from None
    return reader(path, splits)


__all__ = ["LOADERS", "Dataset", "DelimitedTriples", "read_dataset"]
