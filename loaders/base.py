"""What every dataset reader produces, and the streaming TSV reader most of them share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kgengine.errors import InputError, KGEngineError
from kgengine.model import Triple


@dataclass(frozen=True)
class Dataset:
    """A dataset ready to load: re-iterable triples (files are re-read on each pass),
    optional entity labels, and where it came from."""

    name: str
    triples: Iterable[Triple]
    labels: Iterable[tuple[str, str]] = ()
    source: str = ""
    splits: tuple[str, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)


def _strip_quotes(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@dataclass(frozen=True)
class DelimitedTriples:
    """Streams ``head SEP relation SEP tail`` lines from one or more files.

    Blank lines are skipped; CRLF endings are accepted; anything else that is not exactly
    three non-empty fields raises :class:`InputError` with file, line number and text."""

    paths: tuple[Path, ...]
    separator: str = "\t"
    unquote: bool = False  # BRINK release: "7"<TAB>aunt_of<TAB>"72"
    relation_suffix: str = ""  # stripped when present (BRINK release: _of)
    order: str = "hrt"  # field order in the file, e.g. "hrt" or "htr"

    def __iter__(self) -> Iterator[Triple]:
        hi, ri, ti = (self.order.index(c) for c in "hrt")
        for path in self.paths:
            with path.open(encoding="utf-8", newline="") as fh:
                for number, raw in enumerate(fh, start=1):
                    line = raw.rstrip("\r\n")
                    if not line.strip():
                        continue
                    fields = line.split(self.separator)
                    if len(fields) != 3:
                        raise InputError(
                            str(path), number, line,
                            f"expected 3 fields separated by {self.separator!r}, got {len(fields)}",
                        )
                    if self.unquote:
                        fields = [_strip_quotes(f) for f in fields]
                    head, relation, tail = fields[hi], fields[ri], fields[ti]
                    if not head or not relation or not tail:
                        raise InputError(str(path), number, line, "empty field")
                    if self.relation_suffix and relation.endswith(self.relation_suffix):
                        relation = relation[: -len(self.relation_suffix)]
                    yield Triple(head, relation, tail)


def split_files(directory: Path, splits: Sequence[str], pattern: str = "{}.txt") -> tuple[Path, ...]:
    """The files of the requested splits, failing clearly on a missing one."""
    paths = []
    for split in splits:
        path = directory / pattern.format(split)
        if not path.is_file():
            raise KGEngineError(f"split {split!r}: {path} does not exist")
        paths.append(path)
    return tuple(paths)


# name -> reader(path or None, splits or None) -> Dataset
LoaderFn = Callable[[Path | None, Sequence[str] | None], Dataset]
