"""``kgengine load`` into real on-disk Oxigraph stores: exact figures on the real datasets,
checked against counts made here with plain Python from the raw files."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest
from helpers.cli import kgengine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kgengine import terms
from kgengine.loaders.base import DelimitedTriples
from kgengine.model import Triple
from kgengine.oxigraph.nquads import QuadWriter, _entity_iris
from kgengine.oxigraph.store import OxigraphStore
from kgengine.progress import NO_PROGRESS
from kgengine.store import assign_private_ids
from load_helpers import entities_of, raw_triples, write_wikidata5m


def check_graph(store_dir: Path, graph: str, expected: list[Triple], labels: dict[str, str]) -> None:
    """Everything the store says about ``graph`` against the raw triples and labels."""
    distinct = set(expected)
    entities = entities_of(expected)
    with OxigraphStore(str(store_dir)) as store:
        info = store.graph_info(graph)
        assert info is not None and info.status == "complete" and info.triples == len(distinct)
        stats = store.stats(graph)
        assert (stats.triples, stats.entities, stats.relations) == (
            len(distinct), len(entities), len({t.relation for t in distinct}))
        assert stats.per_relation == dict(Counter(t.relation for t in distinct))
        assert set(store.triples(graph)) == distinct
        assert store.labels(graph) == {e: name for e, name in labels.items() if e in entities}
        assert store.private_ids(graph) == assign_private_ids(entities, 0)


@pytest.mark.slow
def test_fb15k237_full_and_per_split(datasets_dir: Path, tmp_path: Path) -> None:
    directory = datasets_dir / "fb15k-237"
    store = tmp_path / "store"
    splits = {s: raw_triples(directory / f"{s}.txt") for s in ("train", "valid", "test")}
    everything = [t for triples in splits.values() for t in triples]
    names = dict(line.split("\t", 1) for line in
                 (directory / "entity2text.txt").read_text(encoding="utf-8").split("\n") if line)
    out = kgengine("load", "fb15k-237", "--path", str(directory), "--store", str(store))
    assert "310,116 triples" in out
    check_graph(store, "fb15k-237", everything, names)
    with OxigraphStore(str(store)) as opened:
        stats = opened.stats("fb15k-237")
        assert (stats.triples, stats.entities, stats.relations) == (310_116, 14_541, 237)
        assert len(opened.labels("fb15k-237")) == 14_541
        # relation2text.txt read here by hand: all 237 relations get their verbalisation
        verbalised = dict(line.rstrip("\r").split("\t", 1) for line in
                          (directory / "relation2text.txt").read_text(encoding="utf-8").split("\n") if line)
        assert opened.relation_labels("fb15k-237") == verbalised and len(verbalised) == 237
    for split, documented in {"train": 272_115, "valid": 17_535, "test": 20_466}.items():
        kgengine("load", "fb15k-237", "--path", str(directory), "--store", str(store),
                 "--graph", f"fb-{split}", "--splits", split)
        with OxigraphStore(str(store)) as opened:
            info = opened.graph_info(f"fb-{split}")
            assert info is not None and info.splits == (split,)
            assert info.triples == len(set(splits[split])) == documented
            entities = opened.run("count_entities", f"fb-{split}")[0]["n"]
            assert entities == len(entities_of(splits[split]))


@pytest.mark.slow
def test_metaqa_kb(datasets_dir: Path, tmp_path: Path) -> None:
    triples = raw_triples(datasets_dir / "metaqa" / "kb_reconstructed.txt", "|")
    kgengine("load", "metaqa", "--path", str(datasets_dir / "metaqa"), "--store", str(tmp_path / "s"))
    check_graph(tmp_path / "s", "metaqa", triples, {e: e for e in entities_of(triples)})
    with OxigraphStore(str(tmp_path / "s")) as store:
        stats = store.stats("metaqa")
        assert (stats.triples, stats.relations) == (130_471, 9)
        assert store.neighbourhood("metaqa", "Grégoire Colin", 1)  # a non-ASCII id round-trips


@pytest.mark.slow
def test_family_brink_and_shared_copy(datasets_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "s"
    facts = raw_triples(datasets_dir / "family" / "facts.txt")
    kgengine("load", "family", "--store", str(store), "--splits", "facts")
    kgengine("load", "family", "--path", str(datasets_dir / "family"), "--store", str(store),
             "--graph", "family-shared", "--splits", "facts")
    kgengine("load", "brink", "--path", str(datasets_dir / "brink-family"), "--store", str(store))
    for graph in ("family", "family-shared", "brink"):
        check_graph(store, graph, facts, {})
    with OxigraphStore(str(store)) as opened:
        assert opened.stats("brink").triples == 17_615 and opened.stats("brink").relations == 12
        assert set(opened.triples("brink")) == set(opened.triples("family"))


def test_wikidata5m_small_files(tmp_path: Path) -> None:
    files = write_wikidata5m(tmp_path / "wd")
    triples = [Triple(*line.split("\t")) for lines in files.values() for line in lines]
    out = kgengine("load", "wikidata5m", "--path", str(tmp_path / "wd"), "--store", str(tmp_path / "s"))
    assert "5 triples" in out  # 6 lines, one duplicate
    # the first name is the label; Q99 is not in the KG, Q4 has no alias line
    labels = {"Q1": "Douglas Adams", "Q5": "human", "Q2": "Zaphod", "Q3": "Łódź"}
    check_graph(tmp_path / "s", "wikidata5m", triples, labels)


_odd_id = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r"),
                  min_size=1, max_size=6).filter(lambda s: s.strip() != "")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(_odd_id, _odd_id, _odd_id), min_size=1, max_size=30))
def test_block_conversion_equals_per_triple_conversion(
    tmp_path: Path, rows: list[tuple[str, str, str]]
) -> None:
    """The fast path (a TSV block at a time) writes byte for byte what the per-triple path
    writes, for ids full of characters that need percent-encoding."""
    source = tmp_path / "kg.tsv"
    source.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    block_source = DelimitedTriples((source,))
    outputs = []
    for triples in (block_source, list(block_source)):
        out = io.BytesIO()
        writer = QuadWriter(out, "g")
        writer.add_triples(triples, NO_PROGRESS)
        writer.add_entities([(row[0], "label " + row[0]) for row in rows], seed=3)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]


def test_odd_ids_round_trip(tmp_path: Path) -> None:
    rows = [("Grand Central", "near/by", "50% off"), ("<é>", 'say "hi"', "a{b}|c^`d\\e"),
            ("🙂", "r", "x\u2028y"), ("%2F", "r", "/")]
    source = tmp_path / "odd.tsv"
    source.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    kgengine("load", "tsv", "--path", str(source), "--store", str(tmp_path / "s"))
    labels = {"Grand Central": 'a "quoted"\nlabel \\ with\r specials', "<é>": "é", "🙂": "smile",
              "not in the graph": "x"}
    with OxigraphStore(str(tmp_path / "s")) as store:
        assert set(store.triples("odd")) == {Triple(*r) for r in rows}
        store.load("odd", [Triple(*r) for r in rows], dataset="tsv", labels=labels, replace=True)
        assert set(store.triples("odd")) == {Triple(*r) for r in rows}
        assert store.labels("odd") == {k: v for k, v in labels.items() if k != "not in the graph"}
        assert store.private_ids("odd") == assign_private_ids(entities_of([Triple(*r) for r in rows]), 0)


def test_entity_iris_in_chunks_equal_one_by_one() -> None:
    ids = [f"e{i}" for i in range(7)] + ["a b", "é/ü", "50%", "tab\there", "x"]
    for chunk in (1, 3, 100):
        assert list(_entity_iris(ids, chunk)) == [terms.entity_iri(i) for i in ids]
