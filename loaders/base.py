"""What every dataset reader produces, and the streaming readers most of them share.

Delimited triple files are read in blocks of whole lines (a few MiB) rather than line by
line: a block that is well formed is checked and normalised with a handful of C-level string
operations, and only a block with something unusual in it (blank lines, quotes, a bad line)
goes through the per-line path, which also produces the error message. Both paths give the
same result; the per-line one is the reference."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kgengine.errors import InputError, InvalidParameterError, KGEngineError
from kgengine.model import Triple
from kgengine.store import block_fields

BLOCK_BYTES = 4 << 20  # bytes read at a time; a block is cut at its last newline
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Dataset:
    """A dataset ready to load: re-iterable triples (files are re-read on each pass),
    optional entity and relation labels (entity labels streamed; only those of entities
    and relations in the KG are stored), and where it came from. ``graph_name`` is the
    graph name a load uses by default ("": the dataset's name; generic readers name the
    graph after the file or directory)."""

    name: str
    triples: Iterable[Triple]
    labels: Iterable[tuple[str, str]] = ()
    source: str = ""
    splits: tuple[str, ...] = ()
    relation_labels: Mapping[str, str] = field(default_factory=dict)
    graph_name: str = ""


def _raw_blocks(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based number of the first line, bytes made of whole lines, each ending in LF)."""
    number = 1
    rest = b""
    with path.open("rb") as fh:
        first = True
        while data := fh.read(BLOCK_BYTES):
            if first:
                data, first = data.removeprefix(_BOM), False
            data = rest + data
            cut = data.rfind(b"\n") + 1
            block, rest = data[:cut], data[cut:]
            if block:
                yield number, block
                number += block.count(b"\n")
    if rest:  # a last line without final newline (several of the real files)
        yield number, rest + b"\n"


def _decode(block: bytes, path: Path, number: int) -> str:
    try:
        return block.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = number + block.count(b"\n", 0, exc.start)
        start = block.rfind(b"\n", 0, exc.start) + 1
        # the readable start of the line, not the undecodable bytes after it
        text = block[start:exc.start].decode("utf-8", errors="replace")[-60:]
        raise InputError(str(path), line, text, f"invalid UTF-8 (byte {block[exc.start]:#04x}) after"
                         ) from None


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its CR/LF) for every line of a UTF-8 file, streamed."""
    for number, raw in _raw_blocks(path):
        for offset, line in enumerate(_decode(raw, path, number).split("\n")[:-1]):
            yield number + offset, line.rstrip("\r")


def _strip_quotes(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@dataclass(frozen=True)
class DelimitedTriples:
    """Streams ``head SEP relation SEP tail`` lines from one or more files.

    Lines end in LF or CRLF; blank lines are skipped; anything else that is not exactly
    three non-empty fields raises :class:`InputError` with file, line number and text."""

    paths: tuple[Path, ...]
    separator: str = "\t"
    unquote: bool = False  # BRINK release: "7"<TAB>aunt_of<TAB>"72"
    relation_suffix: str = ""  # stripped when present (BRINK release: _of)
    order: str = "hrt"  # field order in the file, e.g. "hrt" or "htr"

    def __post_init__(self) -> None:
        if len(self.separator) != 1 or self.separator in "\r\n":
            raise InvalidParameterError(
                f"separator must be one character other than CR/LF, got {self.separator!r}")
        if sorted(self.order) != ["h", "r", "t"]:
            raise InvalidParameterError(f"order must be a permutation of 'hrt', got {self.order!r}")

    @property
    def _fast(self) -> bool:
        return not self.unquote and not self.relation_suffix and self.order == "hrt"

    def blocks(self) -> Iterator[str]:
        sep = self.separator
        s = re.escape(sep)
        # finds a line that is NOT three non-empty fields (searched from a prepended LF)
        bad_line = re.compile(rf"\n(?![^{s}\n]+{s}[^{s}\n]+{s}[^{s}\n]+$)", re.M)
        for path in self.paths:
            for number, raw in _raw_blocks(path):
                text = _decode(raw, path, number)
                if self._fast:
                    if "\r" in text:
                        text = text.replace("\r\n", "\n")
                    clean = "\r" not in text and (sep == "\t" or "\t" not in text)
                    if clean and bad_line.search("\n" + text, 0, len(text)) is None:
                        yield text if sep == "\t" else text.replace(sep, "\t")
                        continue
                normalised = self._per_line(text, path, number)
                if normalised:
                    yield normalised

    def _per_line(self, text: str, path: Path, number: int) -> str:
        hi, ri, ti = (self.order.index(c) for c in "hrt")
        sep = self.separator
        out: list[str] = []
        for offset, raw in enumerate(text.split("\n")[:-1]):
            line = raw.rstrip("\r")
            if not line.strip():
                continue
            fields = line.split(sep)
            if len(fields) != 3:
                raise InputError(
                    str(path), number + offset, line,
                    f"expected 3 fields separated by {sep!r}, got {len(fields)}",
                )
            if self.unquote:
                fields = [_strip_quotes(f) for f in fields]
            head, relation, tail = fields[hi], fields[ri], fields[ti]
            if not head or not relation or not tail:
                raise InputError(str(path), number + offset, line, "empty field")
            if "\t" in line and sep != "\t":
                raise InputError(str(path), number + offset, line, "TAB inside a field")
            if self.relation_suffix and relation.endswith(self.relation_suffix) \
                    and len(relation) > len(self.relation_suffix):
                relation = relation[: -len(self.relation_suffix)]
            out.append(f"{head}\t{relation}\t{tail}\n")
        return "".join(out)

    def __iter__(self) -> Iterator[Triple]:
        for block in self.blocks():
            for line in block.split("\n")[:-1]:
                yield Triple(*line.split("\t"))


@dataclass(frozen=True)
class NamesFile:
    """Streams ``id<TAB>name[<TAB>alias...]`` files as (id, first name) label pairs."""

    paths: tuple[Path, ...]
    transform: Callable[[str], str] | None = None  # e.g. FB15k_mid2name.txt: '_' -> ' '

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for path in self.paths:
            for number, line in read_lines(path):
                if not line.strip():
                    continue
                fields = line.split("\t", 2)
                if len(fields) < 2 or not fields[0] or not fields[1]:
                    raise InputError(str(path), number, line, "expected 'id<TAB>name[<TAB>alias...]'")
                name = self.transform(fields[1]) if self.transform else fields[1]
                yield fields[0], name


def read_names(path: Path) -> dict[str, str]:
    """A small ``id<TAB>name`` file (relation names) as a dict; first name wins."""
    out: dict[str, str] = {}
    for key, name in NamesFile((path,)):
        out.setdefault(key, name)
    return out


@dataclass(frozen=True)
class SelfLabels:
    """Every entity of ``triples`` labelled with its own id (datasets whose ids are names)."""

    triples: DelimitedTriples

    def __iter__(self) -> Iterator[tuple[str, str]]:
        seen: set[str] = set()
        for block in self.triples.blocks():  # set operations per block, not per line
            fields = block_fields(block)
            new = set(fields[0:-1:3])
            new.update(fields[2::3])
            new -= seen
            seen |= new
            yield from ((entity, entity) for entity in sorted(new))


def split_files(directory: Path, splits: Sequence[str], pattern: str = "{}.txt") -> tuple[Path, ...]:
    """The files of the requested splits, failing clearly on a missing one."""
    if not directory.is_dir():
        raise KGEngineError(f"{directory} is not a directory")
    paths = []
    for split in splits:
        path = directory / pattern.format(split)
        if not path.is_file():
            raise KGEngineError(f"split {split!r}: {path} does not exist")
        paths.append(path)
    return tuple(paths)


def split_dataset(name: str, directory: Path, splits: Sequence[str] | None, known: Sequence[str], *,
                  pattern: str = "{}.txt", entity_names: NamesFile | None = None,
                  relation_names: Path | None = None) -> Dataset:
    """A dataset kept as one triples file per split (``pattern`` names them), with an
    optional entity names file and relation names file."""
    chosen = choose_splits(splits, known)
    return Dataset(
        name=name,
        triples=DelimitedTriples(split_files(directory, chosen, pattern)),
        labels=entity_names or (),
        source=str(directory),
        splits=chosen,
        relation_labels=read_names(relation_names) if relation_names else {},
    )


def choose_splits(requested: Sequence[str] | None, known: Sequence[str]) -> tuple[str, ...]:
    """The requested splits (default: all), refusing names the dataset does not have."""
    if not requested:
        return tuple(known)
    unknown = [s for s in requested if s not in known]
    if unknown:
        raise KGEngineError(f"unknown split(s) {', '.join(unknown)}; this dataset has {', '.join(known)}")
    return tuple(dict.fromkeys(requested))


def data_path(name: str, path: Path | None) -> Path:
    """``--path``, else ``$KGENGINE_DATA/<name>``; a clear error when neither exists."""
    if path is not None:
        if not path.exists():
            raise KGEngineError(f"{path} does not exist")
        return path
    root = os.environ.get("KGENGINE_DATA")
    if root and (Path(root) / name).exists():
        return Path(root) / name
    where = f" and $KGENGINE_DATA/{name} ({Path(root) / name}) does not exist" if root else \
        f" (or set $KGENGINE_DATA to a directory holding {name}/)"
    raise KGEngineError(f"dataset {name!r} needs --path{where}")


def option_flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise KGEngineError(f"option {key}={value!r}: expected true or false")


def check_options(dataset: str, options: Mapping[str, str], allowed: Iterable[str]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        known = ", ".join(sorted(allowed)) or "none"
        raise KGEngineError(f"dataset {dataset!r} has no option {', '.join(unknown)} (options: {known})")


class LoaderFn(Protocol):
    """name -> reader(path or None, splits or None, **options) -> Dataset"""

    def __call__(self, path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset: ...
