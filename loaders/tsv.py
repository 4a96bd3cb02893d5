"""A user's own KG as delimited text: ``head<TAB>relation<TAB>tail`` lines.

``--path`` is a file, or a directory: with ``--splits a,b`` its files ``a.tsv``/``a.txt``,
``b...``; without, every ``*.tsv`` and ``*.txt`` file in it (sorted by name). Options:
``separator`` (one character, or ``tab``/``comma``/``pipe``/``space``; default TAB) and
``order`` (field order in the file, default ``hrt``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from kgengine.errors import KGEngineError
from kgengine.loaders.base import Dataset, DelimitedTriples, check_options, data_path

NAME = "tsv"
_SEPARATORS = {"tab": "\t", "comma": ",", "pipe": "|", "space": " ", "semicolon": ";"}


def graph_name_for(path: Path) -> str:
    """A default graph name from the file or directory name (graph names are restricted)."""
    stem = path.stem if path.is_file() else path.name
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-._")[:128]
    return cleaned or NAME


def _files(root: Path, splits: Sequence[str] | None) -> tuple[Path, ...]:
    if root.is_file():
        if splits:
            raise KGEngineError(f"--splits needs a directory of split files; {root} is a file")
        return (root,)
    if splits:
        found = []
        for split in splits:
            candidates = [root / f"{split}.tsv", root / f"{split}.txt"]
            match = next((c for c in candidates if c.is_file()), None)
            if match is None:
                raise KGEngineError(f"split {split!r}: neither {candidates[0]} nor {candidates[1]} exists")
            found.append(match)
        return tuple(found)
    files = tuple(sorted(p for p in root.iterdir() if p.suffix in (".tsv", ".txt") and p.is_file()))
    if not files:
        raise KGEngineError(f"no *.tsv or *.txt files in {root}")
    return files


def read_tsv(path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset:
    check_options(NAME, options, ("separator", "order"))
    root = data_path(NAME, path)
    separator = options.get("separator", "\t")
    separator = _SEPARATORS.get(separator.lower(), separator)
    try:
        triples = DelimitedTriples(_files(root, splits), separator=separator,
                                   order=options.get("order", "hrt"))
    except ValueError as exc:
        raise KGEngineError(str(exc)) from None
    chosen = tuple(p.stem for p in triples.paths)
    return Dataset(name=NAME, triples=triples, source=str(root), splits=chosen,
                   graph_name=graph_name_for(root))
