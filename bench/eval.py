"""Scoring speed of the strict BRINK metrics (a benchmark, not a test): parse + score a
seeded synthetic gold/pred pair in the official formats (N questions, 1-8 gold answers and
0-10 predicted pieces each, about half of them gold), for the strict metrics, the permissive
variant, and `kgengine eval score --json` end to end (JSON files on disk). Prints a Markdown
table and writes bench/results/eval.json.

    .venv/bin/python bench/eval.py [--questions 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100_000)
    args = parser.parse_args()
    gold, pred = synthetic(args.questions)
    rows = {"strict": timed(lambda: evaluate_records(gold, pred)),
            "permissive": timed(lambda: evaluate_permissive(gold, pred))}
    with tempfile.TemporaryDirectory() as tmp:
        gold_path, pred_path = Path(tmp) / "gold.json", Path(tmp) / "pred.json"
        gold_path.write_text(json.dumps(gold))
        pred_path.write_text(json.dumps(pred))
        cli = [sys.executable, "-m", "kgengine.cli", "eval", "score", "--gold", str(gold_path),
               "--pred", str(pred_path), "--json"]
        rows["cli (files, process start)"] = timed(
            lambda: subprocess.run(cli, check=True, capture_output=True), 1)
    print(f"| scoring {args.questions:,} questions | seconds | questions/s |\n|---|---|---|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds:.2f} | {args.questions / seconds:,.0f} |")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"questions": args.questions, "seconds": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
