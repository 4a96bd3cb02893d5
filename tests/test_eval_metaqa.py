"""``kgengine eval`` on real MetaQA (the shared KB in a real Oxigraph store, real questions,
H4's offline answerer learning from real dev questions): Hit@1 over seeded samples checked
against an independent computation from results.jsonl, and the held-out-patterns protocol."""

from __future__ import annotations

import json
import random
import re
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner
from kgengine.cli import main
from kgengine.loaders import read_dataset
from kgengine.oxigraph.store import OxigraphStore


def head_lines(source: Path, target: Path, n: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(source.read_text(encoding="utf-8").splitlines(True)[:n]), encoding="utf-8")


@pytest.fixture(scope="module")
def metaqa(datasets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("eval-metaqa")
    with OxigraphStore(str(root / "store")) as store:
        data = read_dataset("metaqa", datasets_dir / "metaqa")
        store.load("metaqa", data.triples, dataset="metaqa", labels=data.labels)
    shared = datasets_dir / "metaqa" / "2-hop"
    for name, n in (("qa_test", 120), ("qa_dev", 2000)):
        head_lines(shared / f"{name}.txt", root / "2-hop" / f"{name}.txt", n)
        head_lines(shared / f"{name}_qtype.txt", root / "2-hop" / f"{name}_qtype.txt", n)
    return {"root": root, "store": root / "store", "test": root / "2-hop" / "qa_test.txt",
            "dev": root / "2-hop" / "qa_dev.txt"}


def run(metaqa: dict[str, Path], out: Path, *extra: str) -> None:
    args = ["eval", "--store", str(metaqa["store"]), "--questions", str(metaqa["test"]),
            "--train", str(metaqa["dev"]), "--graph", "metaqa", "--option",
            f"cache_dir={metaqa['root'] / 'cache'}", "-o", str(out), *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_hit_at_1_over_seeded_samples(metaqa: dict[str, Path]) -> None:
    out = metaqa["root"] / "sampled"
    run(metaqa, out, "--sample", "40", "--seeds", "0-2")
    summary = json.loads((out / "summary.json").read_text())
    (s,) = summary["settings"].values()
    records = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}

    def hit(r: dict) -> float:  # KG-RAG §4.2.1, written here independently
        top = (r["top_answer"] or "").lower().strip()
        return float(any(top == g.lower().strip() for g in r["gold"]["answers"]))

    per_seed = []
    for seed in ("0", "1", "2"):
        figures = s["seeds"][seed]
        assert figures["n"] == 40
        per_seed.append(figures["hit@1"])
    # the seeds' figures from the records themselves
    lines = metaqa["test"].read_text(encoding="utf-8").splitlines()
    for seed, figure in zip((0, 1, 2), per_seed, strict=True):
        chosen = sorted(random.Random(seed).sample(range(len(lines)), 40))
        ids = [f"metaqa-2hop-test-{i + 1}" for i in chosen]
        assert figure == sum(hit(records[i]) for i in ids) / 40
    assert s["hit@1"] == pytest.approx(statistics.fmean(per_seed))
    assert s["std"]["hit@1"] == pytest.approx(statistics.pstdev(per_seed))
    assert s["hits_hard"] is None and s["hhr"] is None  # no hard answer in MetaQA
    assert 0.0 <= s["answerable_ceiling"] <= 1.0
    assert s["hit@1"] >= 0.8  # the offline answerer, learned from 2,000 dev questions
    assert (out / "hit1_by_hop.png").stat().st_size > 0


@pytest.mark.slow
def test_heldout_question_types_are_kept_out_of_learning(metaqa: dict[str, Path]) -> None:
    out = metaqa["root"] / "heldout"
    run(metaqa, out, "--heldout-share", "0.3", "--heldout-seed", "1", "--heldout-by", "qtype")
    summary = json.loads((out / "summary.json").read_text())
    info = next(iter(summary["question_set_info"].values()))
    held = set(info["heldout_patterns"])
    train_types = (out / "heldout" / "2-hop" / "qa_dev_qtype.txt").read_text().splitlines()
    dev_types = (metaqa["root"] / "2-hop" / "qa_dev_qtype.txt").read_text().splitlines()
    assert held and not held & set(train_types)  # learning never saw a held-out pattern
    assert len(train_types) == sum(1 for t in dev_types if t not in held)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    test_types = (metaqa["root"] / "2-hop" / "qa_test_qtype.txt").read_text().splitlines()
    assert len(records) == sum(1 for t in test_types if t in held)  # only held-out patterns scored
    assert {r["gold"]["pattern"] for r in records} <= held
    assert all(r["train"].endswith("heldout/2-hop/qa_dev.txt") for r in records)


@pytest.mark.slow
def test_heldout_text_patterns_are_kept_out_of_learning(metaqa: dict[str, Path]) -> None:
    out = metaqa["root"] / "heldout-patterns"
    run(metaqa, out, "--heldout-share", "0.3", "--heldout-seed", "1")
    info = next(iter(json.loads((out / "summary.json").read_text())["question_set_info"].values()))
    held = set(info["heldout_patterns"])

    def template(line: str) -> str:  # independent of the code: text with the [mention] replaced
        text = line.split("\t")[0]
        return " ".join(re.sub(r"\[[^\]]+\]", "<e>", text).lower().split())

    trained = {template(line) for line in (out / "heldout" / "2-hop" / "qa_dev.txt").read_text().splitlines()}
    assert held and len({template(p.replace("<E>", "[x]")) for p in held} & trained) == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    scored = {template(r["question"]) for r in records}
    assert records and scored <= {template(p.replace("<E>", "[x]")) for p in held}
