"""The dataset-loader contract, run for every registered loader (tests/helpers/kinds.py): a
small input written here in the loader's format is read back as the triples an independent
reading expects, the triples can be read twice, and an option the loader does not know is
refused in one line. A new loader is tested by registering it and adding its case here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.kinds import KindCases
from kgengine.errors import KGEngineError
from kgengine.loaders import LOADERS, Dataset, read_dataset
from kgengine.loaders.family import bundled_path
from kgengine.model import Triple
from load_helpers import raw_triples, write_wikidata5m


@dataclass(frozen=True)
class LoaderInput:
    """What one loader reads (``path`` None: its bundled copy) and the triples expected."""

    path: Path | None
    expected: list[Triple]
    splits: tuple[str, ...] | None = None


def _family(folder: Path) -> LoaderInput:
    return LoaderInput(None, raw_triples(Path(bundled_path()) / "facts.txt"), ("facts",))


def _fb15k237(folder: Path) -> LoaderInput:
    rows = {"train": ["/m/01\t/film/film/genre\t/m/02"], "valid": ["/m/03\t/people/person/spouse\t/m/04"],
            "test": ["/m/01\t/film/film/country\t/m/05"]}
    for split, lines in rows.items():
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return LoaderInput(folder, [Triple(*line.split("\t")) for lines in rows.values() for line in lines])


def _wikidata5m(folder: Path) -> LoaderInput:
    files = write_wikidata5m(folder)
    return LoaderInput(folder, [Triple(*line.split("\t")) for lines in files.values() for line in lines])


def _metaqa(folder: Path) -> LoaderInput:
    (folder / "kb.txt").write_text("Heat|directed_by|Michael Mann\nHeat|release_year|1995\n",
                                   encoding="utf-8")
    return LoaderInput(folder, [Triple("Heat", "directed_by", "Michael Mann"),
                                Triple("Heat", "release_year", "1995")])


def _brink(folder: Path) -> LoaderInput:
    (folder / "facts.tsv").write_text('"a"\tfather_of\t"b"\n"b"\tmother_of\t"c"\n', encoding="utf-8")
    return LoaderInput(folder, [Triple("a", "father", "b"), Triple("b", "mother", "c")])


def _tsv(folder: Path) -> LoaderInput:
    path = folder / "kg.tsv"
    path.write_text("x\tr\ty\ny\tr\tz\n", encoding="utf-8")
    return LoaderInput(path, raw_triples(path))


def _rdf(folder: Path) -> LoaderInput:
    path = folder / "kg.nt"
    path.write_text("<http://kgengine.org/e/x> <http://kgengine.org/r/r> <http://kgengine.org/e/y> .\n",
                    encoding="utf-8")
    return LoaderInput(path, [Triple("x", "r", "y")])


LOADER_CASES = KindCases[Callable[[Path], LoaderInput]](LOADERS, {
    "family": _family,
    "fb15k-237": _fb15k237,
    "wikidata5m": _wikidata5m,
    "metaqa": _metaqa,
    "brink": _brink,
    "tsv": _tsv,
    "rdf": _rdf,
}, "tests/test_loader_contract.py")


@pytest.mark.parametrize("name", LOADER_CASES.registry.names())
class TestLoaderContract:
    def given(self, name: str, tmp_path: Path) -> tuple[LoaderInput, Dataset]:
        case = LOADER_CASES.case(name)(tmp_path)
        return case, read_dataset(name, case.path, case.splits)

    def test_reads_the_triples_of_its_format(self, name: str, tmp_path: Path) -> None:
        case, dataset = self.given(name, tmp_path)
        assert isinstance(dataset, Dataset)
        assert list(dataset.triples) == case.expected
        assert list(dataset.triples) == case.expected  # re-iterable: a load reads it more than once
        assert all(isinstance(t, Triple) and all(isinstance(x, str) and x for x in t) for t in case.expected)

    def test_refuses_an_option_it_does_not_know(self, name: str, tmp_path: Path) -> None:
        case = LOADER_CASES.case(name)(tmp_path)
        with pytest.raises(KGEngineError, match="has no option colour"):
            read_dataset(name, case.path, case.splits, colour="red")
