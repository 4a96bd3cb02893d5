"""Helpers shared by the loader tests: independent readings of the raw files, small
Wikidata5m-format files (the CLI helpers are in tests/helpers/cli.py)."""

from __future__ import annotations

from pathlib import Path

from kgengine.model import Triple


def raw_triples(path: Path, sep: str = "\t") -> list[Triple]:
    """The independent reading: whole file, CRLF stripped, split on the separator."""
    text = path.read_bytes().decode("utf-8")
    return [Triple(*line.rstrip("\r").split(sep)) for line in text.split("\n") if line.strip()]


def write_wikidata5m(directory: Path, alias_dir: Path | None = None) -> dict[str, list[str]]:
    files = {
        "train": ["Q1\tP31\tQ5", "Q2\tP31\tQ5", "Q1\tP22\tQ2", "Q1\tP31\tQ5"],  # one duplicate
        "valid": ["Q3\tP40\tQ1"],
        "test": ["Q4\tP31\tQ5"],
    }
    directory.mkdir(parents=True, exist_ok=True)
    for split, lines in files.items():
        (directory / f"wikidata5m_transductive_{split}.txt").write_text("\n".join(lines) + "\n")
    aliases = alias_dir or directory
    aliases.mkdir(parents=True, exist_ok=True)
    (aliases / "wikidata5m_entity.txt").write_text(
        "Q1\tDouglas Adams\tDouglas Noël Adams\tDNA\nQ5\thuman\nQ2\tZaphod\nQ99\tnot in the KG\nQ3\tŁódź\n"
    )
    (aliases / "wikidata5m_relation.txt").write_text("P31\tinstance of\tis a\nP22\tfather\n")
    return files


def entities_of(triples: list[Triple]) -> set[str]:
    return {t.head for t in triples} | {t.tail for t in triples}

