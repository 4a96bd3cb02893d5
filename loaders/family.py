"""Family KG (Neural-LP / DRUM layout): facts/train/valid/test.txt, ``head<TAB>rel<TAB>tail``."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from kgengine.loaders.base import Dataset, check_options, split_dataset

SPLITS = ("facts", "train", "valid", "test")


def bundled_path() -> Path:
    """The copy of the Family KG shipped inside the package (demo and tests)."""
    return Path(str(resources.files("kgengine.data") / "family"))


def read_family(path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset:
    check_options("family", options, ())
    return split_dataset("family", path or bundled_path(), splits, SPLITS)
