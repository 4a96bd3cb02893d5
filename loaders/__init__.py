"""Dataset readers, registered by name (one :class:`kgengine.registry.Registry`): a reader's
module is imported only when its dataset is read; a package adds one with an entry point in
the ``kgengine.loaders`` group (``name = "module:function"``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeGuard

from kgengine.loaders.base import Dataset, DelimitedTriples, LoaderFn
from kgengine.registry import Registry


def _is_loader(obj: object) -> TypeGuard[LoaderFn]:
    return callable(obj)


LOADERS: Registry[LoaderFn] = Registry("dataset", "kgengine.loaders", {
    "family": "kgengine.loaders.family:read_family",
    "fb15k-237": "kgengine.loaders.fb15k237:read_fb15k237",
    "wikidata5m": "kgengine.loaders.wikidata5m:read_wikidata5m",
    "metaqa": "kgengine.loaders.metaqa:read_metaqa",
    "brink": "kgengine.loaders.brink:read_brink",
    "tsv": "kgengine.loaders.tsv:read_tsv",
    "rdf": "kgengine.loaders.rdf:read_rdf",
}, accepts=_is_loader, expected="a dataset reader (path, splits, **options) -> Dataset")


def read_dataset(
    name: str, path: Path | None = None, splits: Sequence[str] | None = None, **options: str
) -> Dataset:
    """The named dataset, ready to load; ``options`` are reader-specific (``key=value``)."""
    return LOADERS.get(name)(path, splits, **options)


__all__ = ["LOADERS", "Dataset", "DelimitedTriples", "read_dataset"]
