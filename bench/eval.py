"""Evaluation speed (a benchmark, not a test).

Scoring: parse + score a seeded synthetic gold/pred pair in the official formats (N
questions, 1-8 gold answers and 0-10 predicted pieces each, about half of them gold), for the
strict metrics, the permissive variant, and `kgengine eval score --json` end to end (JSON
files on disk).

End to end (``--brink``): `kgengine eval --method offline` of a BRINK build's test split
(complete and incomplete KG), as a user runs it, process start to exit: cold (the build's
graphs not in the store, no cache: rules mined, paths and cuts learned) and warm (the same
command again: graphs and caches there, every question answered again). Cases: ``family``
(the bundled Family facts and AMIE 3 rules) and ``fb15k-237`` (FB15k-237 from
$KGENGINE_SHARED, 300 rules of max length 3, a question per grounding: the README's row).
The builds themselves are not timed (bench/brink.py times them).

Prints Markdown tables and writes bench/results/eval.json (the scoring and the end-to-end
figures kept side by side: a run of one part keeps the other's last figures).

    .venv/bin/python bench/eval.py [--questions 100000] [--brink family,fb15k-237 [--work DIR]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kgengine.eval.metrics import evaluate_permissive, evaluate_records

RESULTS = Path(__file__).resolve().parent / "results" / "eval.json"


def synthetic(n: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    gold, pred = [], []
    for i in range(n):
        answers = [f"e{rng.randrange(15000):05d}" for _ in range(rng.randint(1, 8))]
        pieces = [rng.choice(answers) if rng.random() < 0.5 else f"e{rng.randrange(15000):05d}"
                  for _ in range(rng.randint(0, 10))]
        gold.append({"id": f"q{i}", "question": f"question {i}?", "answers": answers,
                     "hard_answer": answers[0]})
        pred.append({"id": f"q{i}", "raw_output": ", ".join(pieces)})
    return gold, pred


def timed(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KGENGINE_SHARED", REPO.parent / "shared"))
# (the graph the build is made from, how to load it, the build's options, eval's options)
BRINK_CASES: dict[str, tuple[str, list[str], list[str], list[str]]] = {
    "family": ("family-facts", ["family", "--splits", "facts", "--graph", "family-facts"],
               ["--rules", str(REPO / "engine" / "brink" / "data" / "family_amie3_len3.tsv")], []),
    "fb15k-237": ("fb15k-237", ["fb15k-237", "--path", str(SHARED / "datasets" / "fb15k-237")],
                  ["--max-len", "3", "--max-rules", "300", "--question-unit", "grounding"], ["--hops", "1"]),
}


def kgengine(*args: str, store: Path) -> float:
    """Seconds of one ``kgengine`` process, start to exit (its output kept for a failure)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kgengine.cli", *args, "--store", str(store)],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"kgengine {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return seconds


def brink_eval(case: str, work: Path) -> dict[str, Any]:
    graph, load, build_options, eval_options = BRINK_CASES[case]
    store, build, out = work / "store", work / f"brink-{case}", work / f"eval-{case}"
    if not (build / "questions_test.jsonl").is_file():
        kgengine("load", *load, "--replace", store=store)
        kgengine("brink", "build", "--graph", graph, *build_options, "-o", str(build), store=store)
    for variant in ("complete", "incomplete"):  # cold: the build's graphs are loaded by eval
        subprocess.run([sys.executable, "-m", "kgengine.cli", "drop", f"{build.name}-{variant}",
                        "--store", str(store)], capture_output=True)
    shutil.rmtree(out, ignore_errors=True)
    command = ["eval", "--questions", str(build), "--method", "offline", *eval_options, "-o", str(out)]
    cold = kgengine(*command, store=store)
    (out / "results.jsonl").unlink()  # warm: graphs and caches kept, every question answered again
    warm = kgengine(*command, store=store)
    summary = json.loads((out / "summary.json").read_text())
    questions = json.loads((build / "stats.json").read_text())["questions"]["test"]
    return {"case": case, "test_questions": questions, "cold_seconds": round(cold, 1),
            "warm_seconds": round(warm, 1), "command": "kgengine " + " ".join(command[:-2]),
            "metrics": summary}


def brink_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| BRINK eval, offline | test questions | cold s | warm s | incomplete: Hits@Any / F1 / HHR "
             "| complete: Hits@Any / F1 / HHR |", "|---|---:|---:|---:|---|---|"]
    for r in rows:
        by_kg = {key.split("/")[1]: m for key, m in r["metrics"]["settings"].items()}
        cells = [" / ".join(f"{by_kg[kg][m]:.3f}" for m in ("hits_any", "f1", "hhr")) for kg in
                 ("incomplete", "complete")]
        lines.append(f"| {r['case']} | {r['test_questions']:,} | {r['cold_seconds']:.1f} | "
                     f"{r['warm_seconds']:.1f} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--brink", help=f"end-to-end cases, comma-separated, of {', '.join(BRINK_CASES)}")
    parser.add_argument("--work", type=Path, help="store, builds, outputs (default: temp)")
    args = parser.parse_args()
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if args.brink:
        cases = args.brink.split(",")
        unknown = [c for c in cases if c not in BRINK_CASES]
        if unknown:
            parser.error(f"--brink: unknown case(s) {', '.join(unknown)}")
        with tempfile.TemporaryDirectory() as tmp:
            work = args.work or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            rows = [brink_eval(case, work) for case in cases]
        print(brink_table(rows))
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({**previous, "brink_end_to_end": rows}, indent=2) + "\n")
        return
    gold, pred = synthetic(args.questions)
    timings = {"strict": timed(lambda: evaluate_records(gold, pred)),
               "permissive": timed(lambda: evaluate_permissive(gold, pred))}
    with tempfile.TemporaryDirectory() as tmp:
        gold_path, pred_path = Path(tmp) / "gold.json", Path(tmp) / "pred.json"
        gold_path.write_text(json.dumps(gold))
        pred_path.write_text(json.dumps(pred))
        cli = [sys.executable, "-m", "kgengine.cli", "eval", "score", "--gold", str(gold_path),
               "--pred", str(pred_path), "--json"]
        timings["cli (files, process start)"] = timed(
            lambda: subprocess.run(cli, check=True, capture_output=True), 1)
    print(f"| scoring {args.questions:,} questions | seconds | questions/s |\n|---|---|---|")
    for name, seconds in timings.items():
        print(f"| {name} | {seconds:.2f} | {args.questions / seconds:,.0f} |")
    RESULTS.parent.mkdir(exist_ok=True)
    results = {**previous, "questions": args.questions, "seconds": timings}
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
