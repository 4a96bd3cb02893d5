"""The official BRINK release's KG files (boschresearch/brink ``data/<kg>/facts.tsv``):
quoted ids and relations suffixed ``_of``, e.g. ``"7"<TAB>aunt_of<TAB>"72"``.

Quotes are removed and, by default, the ``_of`` suffix too, so that the relation names are
those of the Neural-LP Family files (``aunt``) and a graph loaded from either source has the
same triples (mined rules, questions and answers then line up). Option
``strip_of=false`` keeps the names as in the file (``aunt_of``).

``--path`` is a ``.tsv`` file or a directory; its splits are its ``*.tsv`` files (default:
``facts``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgengine.errors import KGEngineError
from kgengine.loaders.base import (
    Dataset,
    DelimitedTriples,
    check_options,
    data_path,
    option_flag,
    split_files,
)

NAME = "brink"
SUFFIX = "_of"


def read_brink(path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset:
    check_options(NAME, options, ("strip_of",))
    root = data_path(NAME, path)
    files: tuple[Path, ...]
    chosen: tuple[str, ...]
    if root.is_file():
        if splits and list(splits) != [root.stem]:
            raise KGEngineError(f"--splits needs a directory of .tsv files; {root} is a file")
        files, chosen = (root,), (root.stem,)
    else:
        chosen = tuple(splits or ("facts",))
        files = split_files(root, chosen, "{}.tsv")
    triples = DelimitedTriples(
        files, unquote=True, relation_suffix=SUFFIX if option_flag(options, "strip_of", True) else ""
    )
    return Dataset(name=NAME, triples=triples, source=str(root), splits=chosen)
