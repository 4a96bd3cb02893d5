"""A user's own KG as RDF: N-Triples, Turtle, N-Quads or TriG (by file extension), parsed by
pyoxigraph's streaming parser (quads are merged: the graph name is ignored).

Ids: an IRI in kgengine's own namespaces (``http://kgengine.org/e/``, ``.../r/``) is decoded
back to the dataset id, any other IRI is its own id (the full IRI string), and a blank node
is ``_:`` + its label (anonymous ``[]`` nodes get a parser-made label, new on every read).

Literal objects: a KG here is entities and relations, so a literal is not an entity.
``rdfs:label`` (and ``skos:prefLabel``) literals become entity labels; other literal-valued
triples are skipped and counted (the CLI reports how many), unless option
``literals=entities`` keeps them as entities whose id is the literal's lexical form."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyoxigraph as ox
from kgengine import terms
from kgengine.errors import InputError, KGEngineError
from kgengine.loaders.base import Dataset, check_options, data_path
from kgengine.loaders.tsv import graph_name_for
from kgengine.model import Triple

NAME = "rdf"
LABEL_PREDICATES = frozenset({terms.RDFS_LABEL, "http://www.w3.org/2004/02/skos/core#prefLabel"})
EXTENSIONS = ("nt", "ttl", "nq", "trig")


def _format(path: Path) -> ox.RdfFormat:
    fmt = ox.RdfFormat.from_extension(path.suffix.lstrip("."))
    if fmt is None or path.suffix.lstrip(".") not in EXTENSIONS:
        raise KGEngineError(f"{path}: unknown RDF file extension (use one of .{', .'.join(EXTENSIONS)})")
    return fmt


def _id(term: ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple) -> str:
    if isinstance(term, ox.NamedNode):
        return terms.decode_iri(term.value)
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    if isinstance(term, ox.Literal):
        return term.value
    raise TypeError(f"unsupported RDF term {term!r}")  # RDF-star quoted triples


def _line_text(path: Path, number: int) -> str:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if n == number:
                return line.rstrip("\r\n")
    return ""


def _quads(path: Path) -> Iterator[ox.Quad | ox.Triple]:
    try:
        yield from ox.parse(path=str(path), format=_format(path))
    except SyntaxError as exc:
        line = exc.lineno or 0
        reason = str(exc.args[0] if exc.args else exc)
        raise InputError(str(path), line, _line_text(path, line) if line else "", reason) from None


@dataclass
class RdfTriples:
    """Re-iterable triples of RDF files; counts the literal-valued triples it skipped."""

    paths: tuple[Path, ...]
    keep_literals: bool = False
    skipped: int = field(default=0, init=False)

    def __iter__(self) -> Iterator[Triple]:
        skipped = 0
        for path in self.paths:
            for quad in _quads(path):
                obj = quad.object
                if isinstance(obj, ox.Literal) and (
                    not self.keep_literals or quad.predicate.value in LABEL_PREDICATES
                ):
                    skipped += quad.predicate.value not in LABEL_PREDICATES
                    continue
                if isinstance(obj, ox.Triple) or isinstance(quad.subject, ox.Triple):
                    raise InputError(str(path), 0, str(quad), "RDF-star quoted triples are not supported")
                yield Triple(_id(quad.subject), _id(quad.predicate), _id(obj))
        self.skipped = skipped

    def warnings(self) -> list[str]:
        if not self.skipped:
            return []
        return [f"skipped {self.skipped:,} literal-valued triple(s) (option literals=entities keeps them)"]


@dataclass(frozen=True)
class RdfLabels:
    paths: tuple[Path, ...]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for path in self.paths:
            for quad in _quads(path):
                if isinstance(quad.object, ox.Literal) and quad.predicate.value in LABEL_PREDICATES \
                        and not isinstance(quad.subject, ox.Triple):
                    yield _id(quad.subject), quad.object.value


def read_rdf(path: Path | None, splits: Sequence[str] | None, **options: str) -> Dataset:
    check_options(NAME, options, ("literals",))
    literals = options.get("literals", "skip")
    if literals not in ("skip", "entities"):
        raise KGEngineError(f"option literals={literals!r}: expected skip or entities")
    root = data_path(NAME, path)
    if root.is_file():
        if splits:
            raise KGEngineError(f"--splits needs a directory of RDF files; {root} is a file")
        files: tuple[Path, ...] = (root,)
    else:
        files = tuple(sorted(p for p in root.iterdir() if p.suffix.lstrip(".") in EXTENSIONS))
        if splits:
            files = tuple(p for p in files if p.stem in splits)
            missing = set(splits) - {p.stem for p in files}
            if missing:
                raise KGEngineError(f"no RDF file for split(s) {', '.join(sorted(missing))} in {root}")
        if not files:
            raise KGEngineError(f"no .{', .'.join(EXTENSIONS)} files in {root}")
    for file in files:
        _format(file)
    return Dataset(
        name=NAME,
        triples=RdfTriples(files, keep_literals=literals == "entities"),
        labels=RdfLabels(files),
        source=str(root),
        splits=tuple(p.stem for p in files),
        graph_name=graph_name_for(root),
    )
