"""The main job on the embedded default: every pipeline stage, on the bundled Family KG in an
on-disk Oxigraph store (``./demo-store``), through the real CLI: load, query, mine, build a
BRINK set, answer some of its test questions offline on the incomplete KG (with evidence
paths), evaluate the offline method complete vs incomplete, and answer one MetaQA question
when the MetaQA data is at hand (``$KGENGINE_DATA`` or ``../shared/datasets``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "demo-store"
OUT = ROOT / "demo-out"
BRINK = OUT / "brink-family"
KG = [sys.executable, "-m", "kgengine.cli"]
QUESTIONS_ASKED = 3  # Family BRINK test questions answered one by one (the eval stage scores all)

STAGES: list[tuple[str, list[str]]] = [
    ("load the bundled Family KG", ["load", "family", "--store", str(STORE)]),
    ("graphs in the store", ["graphs", "--store", str(STORE)]),
    ("statistics", ["stats", "--store", str(STORE), "--graph", "family"]),
    ("a SPARQL query", ["query", "--store", str(STORE), "--graph", "family",
                        "SELECT ?r (COUNT(*) AS ?n) WHERE { ?h ?r ?t } "
                        "GROUP BY ?r ORDER BY DESC(?n) LIMIT 5"]),
    # mining and BRINK use facts.txt only, as the official release; the build prints its statistics
    ("load Family facts.txt as BRINK's input", ["load", "family", "--store", str(STORE),
                                                "--graph", "family-facts", "--splits", "facts"]),
    ("mine Horn rules (AMIE 3 semantics, BRINK's thresholds)",
     ["mine", "--store", str(STORE), "--graph", "family-facts", "--max-len", "3",
      "-o", str(OUT / "rules.tsv"), "--json", str(OUT / "rules.json")]),
    ("build a Family BRINK set (template questions, the mined rules)",
     ["brink", "build", "--store", str(STORE), "--graph", "family-facts",
      "--rules", str(OUT / "rules.tsv"), "-o", str(BRINK)]),
    ("load the BRINK set's incomplete KG (its removed triples are what the questions ask)",
     ["load", "tsv", "--path", str(BRINK / "kg_incomplete.tsv"), "--store", str(STORE),
      "--graph", "brink-family-incomplete"]),
]


def run(title: str, args: list[str]) -> None:
    print(f"\n== {title}: kgengine {' '.join(args)}", flush=True)
    # the demo's rule and path caches live in its output folder, not the user's cache
    env = {**os.environ, "KGENGINE_CACHE": os.environ.get("KGENGINE_CACHE", str(OUT / "cache"))}
    done = subprocess.run(KG + args, cwd=ROOT, env=env)
    if done.returncode != 0:
        print(f"stage failed: {title}", file=sys.stderr)
        sys.exit(done.returncode)


def ask_stages() -> list[tuple[str, list[str]]]:
    """A few test questions of the build, answered offline on the incomplete KG: only the
    question text and topic entity go to `kgengine ask`; it learns from the train split and
    mines its rules on the incomplete KG (never the complete one)."""
    stages = []
    with (BRINK / "questions_test.jsonl").open(encoding="utf-8") as lines:
        for line in list(lines)[:QUESTIONS_ASKED]:
            record = json.loads(line)
            stages.append((f"answer BRINK test question {record['id']} offline (incomplete KG)",
                           ["ask", record["question"], "--entity", record["topic_entity"],
                            "--store", str(STORE), "--graph", "brink-family-incomplete",
                            "--train", str(BRINK / "questions_train.jsonl")]))
    return stages


def metaqa_dir() -> Path | None:
    for base in (os.environ.get("KGENGINE_DATA"), ROOT.parent / "shared" / "datasets"):
        if base and (Path(base) / "metaqa" / "2-hop" / "qa_dev.txt").is_file():
            return Path(base) / "metaqa"
    return None


def main() -> int:
    shutil.rmtree(STORE, ignore_errors=True)
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir()
    for title, args in STAGES:
        run(title, args)
    for title, args in ask_stages():
        run(title, args)
    run("evaluate the offline method on the Family BRINK test split, complete vs incomplete",
        ["eval", "--questions", str(BRINK), "--method", "offline", "--store", str(STORE),
         "-o", str(OUT / "eval-family")])
    metaqa = metaqa_dir()
    if metaqa is None:
        print("\n(MetaQA not found in $KGENGINE_DATA or ../shared/datasets: its stage is skipped)")
    else:
        run("load MetaQA's movie KB", ["load", "metaqa", "--path", str(metaqa), "--store", str(STORE)])
        run("answer a 2-hop MetaQA question offline (paths learned from 2-hop dev)",
            ["ask", "which person directed the movies starred by [John Krasinski]", "--store", str(STORE),
             "--graph", "metaqa", "--train", str(metaqa / "2-hop" / "qa_dev.txt")])
    print(f"\ndemo finished: store in {STORE}, outputs in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
