"""BRINK end to end on the real Family KG (facts.txt, as the official release) in a real
Oxigraph store, with the real AMIE 3 rules; figures checked against the official release
as a sanity band (not an exact match: see docs/brink.md, "Figures against the official release")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from kgengine.brink.build import BuildOptions, build_brink
from kgengine.brink.questions import SPLITS, QuestionUnit, balance, make_items, mentions
from kgengine.brink.removal import removal_violations
from kgengine.brink.report import OFFICIAL
from kgengine.cli import main
from kgengine.mining.io import read_rules
from kgengine.oxigraph.store import OxigraphStore
from shared_data import SHARED

AMIE_RULES = SHARED / "reference" / "amie3" / "family_facts_len3.tsv"
BUNDLED_RULES = Path(__file__).resolve().parent.parent / "engine" / "brink" / "data" / "family_amie3_len3.tsv"


def read_questions(out: Path) -> dict[str, list[dict]]:
    return {s: [json.loads(line) for line in (out / f"questions_{s}.jsonl").read_text().splitlines()]
            for s in SPLITS}


def read_kg(path: Path) -> set[tuple[str, ...]]:
    return {tuple(line.split("\t")) for line in path.read_text().splitlines()}


def within(value: int, official: int, band: float) -> bool:
    return abs(value - official) <= band * official


@pytest.fixture(scope="module")
def family_build(family_oxigraph, tmp_path_factory: pytest.TempPathFactory):
    rules = read_rules(AMIE_RULES)
    out = tmp_path_factory.mktemp("brink-family")
    return build_brink(family_oxigraph, "family-facts", rules, out, BuildOptions(workers=2)), rules, out


def test_bundled_rules_are_the_amie_reference() -> None:
    assert BUNDLED_RULES.read_bytes() == AMIE_RULES.read_bytes()


@pytest.mark.slow
def test_family_build_lands_in_the_official_sanity_band(family_build) -> None:
    result, rules, out = family_build
    official = OFFICIAL["family"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["rules"]["by_type"] == official["rules"]  # 145: 0 / 6 / 0 / 56 / 83
    assert stats["triples"]["complete"] == official["triples"]["complete"] == 17_615
    # the incomplete KG: official 15,785 (1,830 removed); we remove a seeded sample's heads
    assert within(stats["triples"]["incomplete"], official["triples"]["incomplete"], 0.03)
    # questions: official 2,165 (one per kept grounding, LLM-cleaned); ours one per triple
    questions = stats["questions"]
    assert within(questions["total"], official["questions"]["total"], 0.12)
    assert questions["train"] == int(0.8 * questions["total"])
    assert questions["valid"] == int(0.9 * questions["total"]) - int(0.8 * questions["total"])
    # the official unit (a question per kept grounding) from the same removal
    per_grounding = balance(make_items(result.removal.kept, QuestionUnit.GROUNDING, 0), 0.01, 0)
    assert within(len(per_grounding), official["questions"]["total"], 0.10)
    assert stats["answerability"]["fraction"] == 1.0
    assert stats["answerability"]["checked"] == len(result.removal.kept)
    assert (out / "stats.md").read_text().startswith("# BRINK statistics: family-facts")


@pytest.mark.slow
def test_family_build_files_keep_every_guarantee(family_build, family_oxigraph) -> None:
    result, rules, out = family_build
    complete_ids = set(family_oxigraph.triples("family-facts"))
    incomplete_ids = complete_ids - set(result.removal.removed)
    assert removal_violations(complete_ids, incomplete_ids, result.removal) == []

    complete, incomplete = read_kg(out / "kg_complete.tsv"), read_kg(out / "kg_incomplete.tsv")
    assert len(complete) == 17_615 and incomplete < complete
    entities = {e for h, _, t in complete for e in (h, t)}
    assert all(e.startswith("e") for e in entities)  # private ids by default
    questions = read_questions(out)
    ids = [q["id"] for qs in questions.values() for q in qs]
    assert len(ids) == len(set(ids))
    forward: dict[tuple[str, str], set[str]] = {}
    inverse: dict[tuple[str, str], set[str]] = {}
    for h, r, t in complete:
        forward.setdefault((h, r), set()).add(t)
        inverse.setdefault((t, r), set()).add(h)
    triples = {s: {tuple(q["removed_triple"]) for q in questions[s]} for s in SPLITS}
    assert not (triples["train"] & triples["valid"] or triples["train"] & triples["test"]
                or triples["valid"] & triples["test"])
    for q in (q for qs in questions.values() for q in qs):
        removed = tuple(q["removed_triple"])
        assert removed in complete and removed not in incomplete
        assert all(tuple(t) in incomplete for p in q["paths"] for t in p["path"])
        assert q["alternative_path"] == q["paths"][0]["path"]
        assert q["hard_answer"] in q["answers"]
        assert mentions(q["question"], q["topic_entity"])
        assert not any(mentions(q["question"], a) for a in q["answers"])
        assert q["hard_answer"] not in q["question"]  # plain substring too (fixed-width ids)
        h, r, t = removed
        topic, answer = (h, t) if q["direction"] == "forward" else (t, h)
        assert (q["topic_entity"], q["hard_answer"], q["relation"]) == (topic, answer, r)
        index = forward if q["direction"] == "forward" else inverse
        assert set(q["answers"]) == index[(topic, r)]  # completed on the complete KG
    table = (out / "rules.tsv").read_text().splitlines()
    assert len(table) == 146
    assert read_rules(out / "rules.tsv")[0].rule == rules[0].rule  # readable back


def small_rules(tmp_path: Path) -> Path:
    """The six inversion rules of the AMIE reference: a fast Family build."""
    rows = AMIE_RULES.read_text().splitlines()
    path = tmp_path / "inversions.tsv"
    path.write_text("\n".join([rows[0], *(r for r in rows[1:] if r.split("\t")[8] == "1")]) + "\n")
    return path


@pytest.fixture
def cli_store(tmp_path: Path) -> str:
    store = str(tmp_path / "store")
    done = CliRunner().invoke(main, ["load", "family", "--store", store, "--graph", "family-facts",
                                     "--splits", "facts"])
    assert done.exit_code == 0, done.output
    return store


@pytest.mark.slow
def test_cli_build_is_seeded_and_stable(cli_store: str, tmp_path: Path) -> None:
    rules = small_rules(tmp_path)
    base = ["brink", "build", "--store", cli_store, "--graph", "family-facts", "--rules", str(rules)]
    runs = {}
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        done = CliRunner().invoke(main, [*base, "--seed", seed, "-o", str(tmp_path / name)])
        assert done.exit_code == 0, done.output
        assert "BRINK statistics" in done.output
        runs[name] = {f.name: f.read_text() for f in (tmp_path / name).iterdir() if f.name != "stats.json"}
    assert runs["a"] == runs["b"]  # same seed: byte-identical dataset
    assert runs["a"]["questions_test.jsonl"] != runs["c"]["questions_test.jsonl"]
    shown = CliRunner().invoke(main, ["brink", "stats", str(tmp_path / "a")])
    assert shown.exit_code == 0 and "| 6 | 0 | 6 | 0 | 0 | 0 |" in shown.output


@pytest.mark.slow
def test_cli_build_loads_named_graphs_and_checks_there(cli_store: str, tmp_path: Path) -> None:
    rules = small_rules(tmp_path)
    args = ["brink", "build", "--store", cli_store, "--graph", "family-facts", "--rules", str(rules),
            "--labels", "id", "--load", "-o", str(tmp_path / "out")]
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["answerability"]["fraction"] == 1.0
    with OxigraphStore(cli_store) as store:
        for variant in ("complete", "incomplete"):
            info = store.graph_info(f"family-facts-brink-{variant}")
            assert info is not None and info.triples == stats["triples"][variant]
        published = set(store.triples("family-facts-brink-incomplete"))
    assert {tuple(t) for t in published} == read_kg(tmp_path / "out" / "kg_incomplete.tsv")
    again = CliRunner().invoke(main, args)  # the graphs exist now
    assert again.exit_code != 0 and "--replace" in again.output
    assert CliRunner().invoke(main, [*args, "--replace"]).exit_code == 0


def test_cli_errors_are_one_line(cli_store: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("body\thead\nnot a rule\twife(?a,?b)\n")
    done = CliRunner().invoke(main, ["brink", "build", "--store", cli_store, "--graph", "family-facts",
                                     "--rules", str(bad), "-o", str(tmp_path / "out")])
    assert done.exit_code != 0 and "bad.tsv:2" in done.output
    missing = CliRunner().invoke(main, ["brink", "build", "--store", cli_store, "--graph", "nope",
                                        "--rules", str(small_rules(tmp_path)), "-o", str(tmp_path / "o")])
    assert missing.exit_code != 0 and "no graph 'nope'" in missing.output
    no_model = CliRunner().invoke(main, ["brink", "build", "--store", cli_store, "--graph", "family-facts",
                                         "--questions", "llm", "-o", str(tmp_path / "o")])
    assert no_model.exit_code != 0 and "--llm-model" in no_model.output


def test_sampling_caps_the_candidates_of_a_big_rule(family_oxigraph, tmp_path: Path) -> None:
    rules = [r for r in read_rules(AMIE_RULES) if len(r.rule.body) == 1][:2]  # 454 and 446 groundings
    options = BuildOptions(groundings_per_rule=5, max_candidates=100)
    result = build_brink(family_oxigraph, "family-facts", rules, tmp_path / "capped", options)
    assert result.stats["groundings"]["capped_rules"] == 2
    assert result.stats["groundings"]["candidates"] is None
    rows = [line.split("\t") for line in (tmp_path / "capped" / "rules.tsv").read_text().splitlines()]
    header = rows[0]
    assert [(r[header.index("groundings")], r[header.index("capped")]) for r in rows[1:]] == [("", "yes")] * 2
    full = build_brink(family_oxigraph, "family-facts", rules, tmp_path / "full",
                       BuildOptions(groundings_per_rule=5))
    assert full.stats["groundings"]["candidates"] == 454 + 446


@pytest.mark.slow
def test_mining_on_the_fly_gives_the_reference_dataset(family_build, cli_store: str, tmp_path: Path) -> None:
    """Without --rules the graph is mined (BRINK's AMIE 3 settings, length 3): the miner
    finds the reference's 145 rules, and each rule samples from its own seeded stream, so
    the dataset is the one built from the reference file."""
    _, _, reference = family_build
    done = CliRunner().invoke(main, ["brink", "build", "--store", cli_store, "--graph", "family-facts",
                                     "-o", str(tmp_path / "mined")])
    assert done.exit_code == 0, done.output
    for name in ("kg_incomplete.tsv", "questions_train.jsonl", "questions_test.jsonl"):
        assert (tmp_path / "mined" / name).read_text() == (reference / name).read_text(), name
