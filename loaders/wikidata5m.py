"""Wikidata5m (Wang et al. 2021), transductive setting: ``Q..<TAB>P..<TAB>Q..`` in
``wikidata5m_transductive_{train,valid,test}.txt`` (about 21M triples, 4.6M entities, 822
relations), and the alias files ``wikidata5m_entity.txt`` / ``wikidata5m_relation.txt``
(``id<TAB>name<TAB>alias...``; the first name is the label).

Everything streams: triples are read in blocks and never held in memory, entity labels are
an iterable over the alias file. ``--path`` may be the directory of the transductive files
or one above it (the official archives unpack to ``wikidata5m_transductive/`` and
``wikidata5m_alias/``); the alias files are looked for next to the triples, in
``wikidata5m_alias/`` there or one level up."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgengine.errors import KGEngineError
from kgengine.loaders.base import Dataset, NamesFile, check_options, data_path, option_flag, split_dataset

NAME = "wikidata5m"
SPLITS = ("train", "valid", "test")
PATTERN = "wikidata5m_transductive_{}.txt"


def _triples_dir(root: Path) -> Path:
    if root.is_file():
        return root.parent
    for candidate in (root, root / "wikidata5m_transductive"):
        if any(candidate.glob(PATTERN.format("*"))):
            return candidate
    files = PATTERN.format("{train,valid,test}")
    raise KGEngineError(f"no {files} in {root} or {root}/wikidata5m_transductive")


def find_alias_file(triples_dir: Path, name: str) -> Path | None:
    for directory in (triples_dir, triples_dir / "wikidata5m_alias", triples_dir.parent / "wikidata5m_alias",
                      triples_dir.parent):
        if (directory / name).is_file():
            return directory / name
    return None


def read_wikidata5m(path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset:
    check_options(NAME, options, ("labels",))
    directory = _triples_dir(data_path(NAME, path))
    entity_file = find_alias_file(directory, "wikidata5m_entity.txt")
    use_labels = option_flag(options, "labels", True)
    return split_dataset(NAME, directory, splits, SPLITS, pattern=PATTERN,
                         entity_names=NamesFile((entity_file,)) if entity_file and use_labels else None,
                         relation_names=find_alias_file(directory, "wikidata5m_relation.txt"))
