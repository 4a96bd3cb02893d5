"""``kgengine neighbours`` and ``kgengine export`` through the real CLI on a real on-disk
Oxigraph store, checked against the raw Family file and against reloading / parsing the export."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyoxigraph
import pytest
from helpers.cli import json_output
from helpers.cli import run_cli_raising as run
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore
from kgengine.terms import RDFS_LABEL, entities_graph_iri, graph_iri

SEED = "7"  # a Family person (the first head of facts.txt)


@pytest.fixture(scope="module")
def explore_dir(tmp_path_factory: pytest.TempPathFactory, datasets_dir: Path) -> Path:
    """Family facts.txt as graph 'fam', and a small labelled RDF graph 'labelled'."""
    folder = tmp_path_factory.mktemp("explore")
    store = str(folder / "store")
    loaded = run("load", "family", "--splits", "facts", "--graph", "fam", "--store", store)
    assert loaded.exit_code == 0, loaded.output
    rdf = folder / "small.nt"
    facts = raw_facts(datasets_dir)[:40]
    lines = [f"<http://kgengine.org/e/{h}> <http://kgengine.org/r/{r}> <http://kgengine.org/e/{t}> .\n"
             for h, r, t in facts]
    people = sorted({h for h, _, _ in facts} | {t for _, _, t in facts})
    lines += [f'<http://kgengine.org/e/{p}> <{RDFS_LABEL}> "Person \\"{p}\\"" .\n' for p in people]
    rdf.write_text("".join(lines), encoding="utf-8")
    loaded = run("load", "rdf", "--path", str(rdf), "--graph", "labelled", "--store", store)
    assert loaded.exit_code == 0, loaded.output
    return folder


def raw_facts(datasets_dir: Path) -> list[Triple]:
    rows = (line.split("\t") for line in
            (datasets_dir / "family" / "facts.txt").read_text(encoding="utf-8").splitlines() if line.strip())
    return [Triple(h.strip(), r.strip(), t.strip()) for h, r, t in rows]


def expected_khop(facts: list[Triple], seed: str, hops: int, direction: str) -> set[Triple]:
    """Independently: every edge (in ``direction``) touching an entity at distance < hops."""
    touching: dict[str, set[Triple]] = defaultdict(set)
    for fact in facts:
        if direction in ("out", "both"):
            touching[fact.head].add(fact)
        if direction in ("in", "both"):
            touching[fact.tail].add(fact)
    distance = {seed: 0}
    layer = [seed]
    for step in range(1, hops):
        nxt = []
        for entity in layer:
            for fact in touching[entity]:
                for other in (fact.head, fact.tail):
                    if other not in distance:
                        distance[other] = step
                        nxt.append(other)
        layer = nxt
    return {fact for entity in distance for fact in touching[entity]}


def neighbours_json(explore_dir: Path, *extra: str) -> set[Triple]:
    result = run("neighbours", SEED, "--graph", "fam", "--store", str(explore_dir / "store"),
                 "--limit", "100000", "--json", *extra)
    assert result.exit_code == 0, result.output
    return {Triple(*row) for row in json_output(result)}


@pytest.mark.parametrize(("hops", "direction"), [(1, "out"), (1, "in"), (2, "both"), (2, "out")])
def test_neighbours_match_the_raw_file(explore_dir: Path, datasets_dir: Path, hops: int,
                                       direction: str) -> None:
    facts = raw_facts(datasets_dir)
    expected = expected_khop(facts, SEED, hops, direction)
    assert expected  # the seed has edges both ways
    assert neighbours_json(explore_dir, "--hops", str(hops), "--direction", direction) == expected


def test_neighbours_relation_filter_and_table(explore_dir: Path, datasets_dir: Path) -> None:
    expected_all = expected_khop(raw_facts(datasets_dir), SEED, 2, "both")
    relation = sorted({t.relation for t in expected_all})[0]
    expected = {t for t in expected_all if t.relation == relation}
    assert 0 < len(expected) < len(expected_all)
    assert neighbours_json(explore_dir, "--hops", "2", "--relation", relation) == expected
    table = run("neighbours", SEED, "--graph", "fam", "--store", str(explore_dir / "store"), "--hops", "2",
                "--relation", relation, "--limit", "100000")
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["head", "relation", "tail"]
    assert {Triple(*line.split()) for line in lines[1:]} == expected


def test_neighbours_limit_caps_the_rows(explore_dir: Path) -> None:
    result = run("neighbours", SEED, "--graph", "fam", "--store", str(explore_dir / "store"),
                 "--hops", "2", "--limit", "3", "--json")
    assert len(json_output(result)) == 3


def test_neighbours_unknown_entity_is_one_line_with_close_matches(explore_dir: Path) -> None:
    result = run("neighbours", "72x", "--graph", "fam", "--store", str(explore_dir / "store"))
    assert result.exit_code != 0
    message = result.output.strip()
    assert len(message.splitlines()) == 1
    assert "no entity '72x'" in message and "close matches" in message and "'72'" in message


def test_neighbours_by_label(explore_dir: Path) -> None:
    result = run("neighbours", f'Person "{SEED}"', "--graph", "labelled", "--store",
                 str(explore_dir / "store"), "--json", "--direction", "out")
    assert result.exit_code == 0, result.output
    rows = json_output(result)
    assert rows and all(h == SEED for h, _, _ in rows)


def test_export_tsv_reloads_to_the_same_triples(explore_dir: Path) -> None:
    store = str(explore_dir / "store")
    out = explore_dir / "fam.tsv"
    result = run("export", "fam", "--format", "tsv", "-o", str(out), "--store", store)
    assert result.exit_code == 0, result.output
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == sorted(lines)
    reloaded = run("load", "tsv", "--path", str(out), "--graph", "fam-again", "--store", store)
    assert reloaded.exit_code == 0, reloaded.output
    with OxigraphStore(store, read_only=True) as opened:
        assert set(opened.triples("fam-again")) == set(opened.triples("fam"))
        assert len(lines) == len(set(opened.triples("fam")))


def test_export_nq_and_nt_parse_with_facts_and_labels(explore_dir: Path) -> None:
    store = str(explore_dir / "store")
    with OxigraphStore(store, read_only=True) as opened:
        facts = set(opened.triples("labelled"))
        labels = opened.labels("labelled")
    assert labels and all(v.startswith("Person ") for v in labels.values())
    for fmt, rdf_format in (("nq", pyoxigraph.RdfFormat.N_QUADS), ("nt", pyoxigraph.RdfFormat.N_TRIPLES)):
        out = explore_dir / f"labelled.{fmt}"
        result = run("export", "labelled", "--format", fmt, "-o", str(out), "--store", store)
        assert result.exit_code == 0, result.output
        quads = list(pyoxigraph.parse(path=str(out), format=rdf_format))
        label_quads = [q for q in quads if q.predicate.value == RDFS_LABEL]
        fact_quads = [q for q in quads if q.predicate.value != RDFS_LABEL]
        assert len(fact_quads) == len(facts)
        assert {q.subject.value.rsplit("/", 1)[1]: q.object.value for q in label_quads} == labels
        if fmt == "nq":
            assert {q.graph_name.value for q in fact_quads} == {graph_iri("labelled")}
            assert {q.graph_name.value for q in label_quads} == {entities_graph_iri("labelled")}
    # the N-Triples export loads back as the same facts and labels
    loaded = run("load", "rdf", "--path", str(explore_dir / "labelled.nt"), "--graph", "labelled-again",
                 "--store", store)
    assert loaded.exit_code == 0, loaded.output
    with OxigraphStore(store, read_only=True) as opened:
        assert set(opened.triples("labelled-again")) == facts
        assert opened.labels("labelled-again") == labels


def test_export_bad_output_path_fails_in_one_line(explore_dir: Path) -> None:
    target = explore_dir / "missing-folder" / "out.tsv"
    result = run("export", "fam", "-o", str(target), "--store", str(explore_dir / "store"))
    assert result.exit_code != 0
    assert len(result.output.strip().splitlines()) == 1
    assert "does not exist" in result.output and not target.parent.exists()
