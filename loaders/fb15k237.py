"""FB15k-237 (Toutanova & Chen 2015): train/valid/test.txt, ``/m/mid<TAB>/relation/path<TAB>/m/mid``
with CRLF line endings.

Labels (option ``labels``, default on when a name file is there): ``entity2text.txt``
(KG-BERT, spaces), else ``FB15k_mid2name.txt`` with ``_`` read as a space. Both cover all
14,951 FB15k MIDs; the store keeps only the labels of the 14,541 entities in the KG.
Relation verbalisations from ``relation2text.txt`` are the relation labels."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgengine.loaders.base import Dataset, NamesFile, check_options, data_path, option_flag, split_dataset

NAME = "fb15k-237"
SPLITS = ("train", "valid", "test")


def _underscores_to_spaces(name: str) -> str:
    return name.replace("_", " ")


def entity_labels(directory: Path) -> NamesFile | None:
    if (directory / "entity2text.txt").is_file():
        return NamesFile((directory / "entity2text.txt",))
    if (directory / "FB15k_mid2name.txt").is_file():
        return NamesFile((directory / "FB15k_mid2name.txt",), transform=_underscores_to_spaces)
    return None


def read_fb15k237(path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset:
    check_options(NAME, options, ("labels",))
    directory = data_path(NAME, path)
    relation_file = directory / "relation2text.txt"
    labels = entity_labels(directory) if option_flag(options, "labels", True) else None
    return split_dataset(NAME, directory, splits, SPLITS, entity_names=labels,
                         relation_names=relation_file if relation_file.is_file() else None)
