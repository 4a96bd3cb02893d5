"""A load's N-Quads, as text: facts, then each entity's private id and label, then relation
labels, written to a binary stream (:mod:`kgengine.oxigraph.bulk` streams it into the store)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import chain, islice, repeat
from typing import BinaryIO, TypeVar
from urllib.parse import quote

from kgengine import terms
from kgengine.oxigraph.layout import slot_iris
from kgengine.progress import NO_PROGRESS, Reporter
from kgengine.store import BlockSource, TripleSource, as_mapping, block_fields, iter_private_ids

T = TypeVar("T")
_VOCAB = terms.VOCAB_NS
CHUNK_LINES = 20_000  # lines per chunk when formatting one triple or entity at a time
_LITERAL_SPECIALS = re.compile(r'[\\"\n\r]')


def nt_literal(value: str) -> str:
    """An N-Triples string literal (escapes per the N-Triples grammar)."""
    if _LITERAL_SPECIALS.search(value) is None:  # the common case: one C-level scan
        return f'"{value}"'
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    )
    return f'"{escaped}"'


# Percent-encoding is per character, so encoding a whole TSV block (TAB and LF left alone)
# gives, field by field, exactly terms.encode_id of each field, in a few C-level calls.
_ASCII_ESCAPES = sorted(
    ((c, quote(c, safe="")) for c in map(chr, range(128)) if terms.encode_id(c) != c and c not in "\t\n"),
    key=lambda pair: pair[0] != "%",  # '%' first: the other codes contain '%'
)
_NEEDS_ESCAPE = re.compile("[" + re.escape("".join(c for c, _ in _ASCII_ESCAPES)) + r"]|[^\x00-\x7f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


@lru_cache(maxsize=65_536)
def _quote_run(run: str) -> str:
    return quote(run, safe="")


def _quote_match(match: re.Match[str]) -> str:
    return _quote_run(match.group())  # the same accented runs come back again and again


def escape_block(block: str) -> str:
    """``terms.encode_id`` applied to every field of a normalised TSV block."""
    if _NEEDS_ESCAPE.search(block) is None:
        return block
    for char, code in _ASCII_ESCAPES:
        if char in block:
            block = block.replace(char, code)
    if not block.isascii():
        block = _NON_ASCII.sub(_quote_match, block)
    return block


def _entity_iris(ordered: Sequence[str], chunk: int = 100_000) -> Iterator[str]:
    """``terms.entity_iri`` of many ids, escaped a chunk at a time in one pass where no id
    holds TAB or LF."""
    prefix = terms.ENTITY_NS
    for start in range(0, len(ordered), chunk):
        ids = ordered[start : start + chunk]
        joined = "\n".join(ids)
        if "\t" in joined or joined.count("\n") != len(ids) - 1:
            yield from map(terms.entity_iri, ids)
        else:
            yield from (prefix + e for e in escape_block(joined).split("\n"))


class QuadWriter:
    """Writes the N-Quads of a load to a binary stream: facts, then private ids and labels,
    keeping the sets of entity ids and relation names met on the way."""

    def __init__(self, out: BinaryIO, graph: str, slot: str = "") -> None:
        facts_iri, entities_iri = slot_iris(graph, slot)
        self.out = out
        self.lines = 0
        self._entities: set[str] = set()
        self._relations: set[str] = set()
        self._facts_end = f"> <{facts_iri}> .\n"
        self._entities_end = f" <{entities_iri}> .\n"

    def _write_text(self, text: str, lines: int, progress: Reporter = NO_PROGRESS) -> None:
        self.out.write(text.encode())
        self.lines += lines
        progress.advance(lines)

    def _write(self, lines: list[str], progress: Reporter = NO_PROGRESS) -> None:
        self._write_text("".join(lines), len(lines), progress)

    def add_triples(self, triples: TripleSource, progress: Reporter) -> None:
        subject, to_object = "<" + terms.ENTITY_NS, "> <" + terms.ENTITY_NS
        to_relation, end = "> <" + terms.RELATION_NS, self._facts_end
        entities, relations = self._entities, self._relations
        if isinstance(triples, BlockSource):
            for block in triples.blocks():
                escaped = escape_block(block)
                enc = block_fields(escaped)
                raw = enc if escaped is block else block_fields(block)
                entities.update(raw[0:-1:3])  # the last item is the '' after the final LF
                entities.update(raw[2::3])
                relations.update(raw[1::3])
                parts = zip(repeat(subject), enc[0::3], repeat(to_relation), enc[1::3],
                            repeat(to_object), enc[2::3], repeat(end))
                self._write_text("".join(chain.from_iterable(parts)), len(enc) // 3, progress)
            return
        encode = terms.encode_id
        for chunk in _batched(triples, CHUNK_LINES):
            for head, relation, tail in chunk:
                entities.add(head)
                entities.add(tail)
                relations.add(relation)
            self._write([f"{subject}{encode(h)}{to_relation}{encode(r)}{to_object}{encode(t)}{end}"
                         for h, r, t in chunk], progress)

    def add_entities(self, labels: Iterable[tuple[str, str]], seed: int) -> None:
        """Private ids of every entity met, and the first label of each that has one
        (labels of entities not in the graph are skipped)."""
        ordered = sorted(self._entities)
        private_iri = f"> <{_VOCAB}privateId> "
        end = self._entities_end
        pairs = zip(iter_private_ids(ordered, seed), _entity_iris(ordered), strict=True)
        for ids in _batched(pairs, CHUNK_LINES):
            # private ids are letters and digits: no literal escaping needed
            self._write([f'<{iri}{private_iri}"{private}"{end}' for (_, private), iri in ids])
        del ordered, pairs
        unlabelled = self._entities
        self._entities = set()
        label_iri = f"> <{terms.RDFS_LABEL}> "
        for chunk in _batched(as_mapping(labels), CHUNK_LINES):
            kept = []
            for entity, text in chunk:
                if entity in unlabelled:
                    unlabelled.discard(entity)
                    kept.append((entity, text))
            iris = _entity_iris([entity for entity, _ in kept])
            self._write([f"<{iri}{label_iri}{nt_literal(text)}{end}"
                         for iri, (_, text) in zip(iris, kept, strict=True)])

    def add_relation_labels(self, labels: Iterable[tuple[str, str]] | Mapping[str, str]) -> None:
        """The first label of each relation of the graph, as ``rdfs:label`` of the relation
        IRI in the companion graph (labels of relations not in the graph are skipped)."""
        label_iri = f"> <{terms.RDFS_LABEL}> "
        unlabelled = self._relations
        kept = []
        for relation, text in as_mapping(labels):
            if relation in unlabelled:
                unlabelled.discard(relation)
                kept.append(f"<{terms.relation_iri(relation)}{label_iri}{nt_literal(text)}{self._entities_end}")
        self._write(kept)


def _batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch
