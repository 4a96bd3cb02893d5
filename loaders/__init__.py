"""Dataset readers, registered by name (pykeen-style registry)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgengine.errors import KGEngineError
from kgengine.loaders.base import Dataset, DelimitedTriples, LoaderFn
from kgengine.loaders.brink import read_brink
from kgengine.loaders.family import read_family
from kgengine.loaders.fb15k237 import read_fb15k237
from kgengine.loaders.metaqa import read_metaqa
from kgengine.loaders.rdf import read_rdf
from kgengine.loaders.tsv import read_tsv
from kgengine.loaders.wikidata5m import read_wikidata5m

LOADERS: dict[str, LoaderFn] = {
    "family": read_family,
    "fb15k-237": read_fb15k237,
    "wikidata5m": read_wikidata5m,
    "metaqa": read_metaqa,
    "brink": read_brink,
    "tsv": read_tsv,
    "rdf": read_rdf,
}


def read_dataset(
    name: str, path: Path | None = None, splits: Sequence[str] | None = None, **options: str
) -> Dataset:
    """The named dataset, ready to load; ``options`` are reader-specific (``key=value``)."""
    try:
        reader = LOADERS[name]
    except KeyError:
        raise KGEngineError(
            f"unknown dataset {name!r}; known: {', '.join(sorted(LOADERS))}"
        ) from None
    return reader(path, splits, **options)


__all__ = ["LOADERS", "Dataset", "DelimitedTriples", "read_dataset"]
