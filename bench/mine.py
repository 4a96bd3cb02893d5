"""Rule-mining benchmark (not a test): ``kgengine mine`` with both counting engines on Family
and FB15k-237, next to the real AMIE 3's own timings.

Each measured run is the real CLI in a fresh subprocess (``kgengine mine ... -o rules.tsv``),
so the wall time includes process start, opening the store and building the index, and the
peak RSS is the run's own (main process; with ``--threads`` > 1 the matrix engine's forked
workers are reported separately: they share the index pages with the main process).

AMIE 3 cannot be run here (its repository is not reachable, and building it needs more than
Maven Central), so the AMIE columns are AMIE 3's own measurements with BRINK's thresholds on
2 cores of the same kind of machine: the Family facts.txt run is the reference output in
../shared/reference/amie3 (its last lines: "Mining done in 12.71 s, Total time 13.18 s"), the
others are the figures quoted in issue 4.

    .venv/bin/python bench/mine.py                 # matrix engine everywhere, query engine on Family
    .venv/bin/python bench/mine.py --query-fb      # also the query engine on FB15k-237 (hours)
    .venv/bin/python bench/mine.py --only family-facts-3

Prints a table and writes ``bench/results/mine.json``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the one shared-data lookup (tests/shared_data.py)
from shared_data import DATASETS  # noqa: E402

KGENGINE = [sys.executable, "-m", "kgengine.cli"]

# graph -> (dataset, splits)
GRAPHS = {
    "family-facts": ("family", "facts"),
    "family": ("family", "facts,train,valid,test"),
    "fb15k-237": ("fb15k-237", "train,valid,test"),
}
# AMIE 3 with -minc 0.3 -minpca 0.4 -minhc 0.1, 2 cores: (rules, seconds, peak RSS MiB, note)
AMIE3 = {
    ("family-facts", 3): (145, 13.18, None, "reference stdout: Total time 13.18 s"),
    ("family", 4): (3925, 144.0, 1.7 * 1024, "issue 4"),
    ("fb15k-237", 3): (1262, 81.0, 3.4 * 1024, "issue 4"),
    ("fb15k-237", 4): (937, None, 4.6 * 1024, "issue 4: not finished after 50 min (937 rules out)"),
}
# case id -> (graph, max_len, engine, threads)
CASES = {
    "family-facts-3-matrix-1": ("family-facts", 3, "matrix", 1),
    "family-facts-3-matrix-2": ("family-facts", 3, "matrix", 2),
    "family-facts-3-query-2": ("family-facts", 3, "query", 2),
    "family-4-matrix-1": ("family", 4, "matrix", 1),
    "family-4-matrix-2": ("family", 4, "matrix", 2),
    "fb15k-237-3-matrix-1": ("fb15k-237", 3, "matrix", 1),
    "fb15k-237-3-matrix-2": ("fb15k-237", 3, "matrix", 2),
    "fb15k-237-4-matrix-2": ("fb15k-237", 4, "matrix", 2),
}
QUERY_FB = {"fb15k-237-3-query-2": ("fb15k-237", 3, "query", 2)}


def job(argv: list[str]) -> None:
    """Run inside the measured subprocess: the CLI in-process, then our own resource usage."""
    from kgengine.cli import main

    try:
        main.main(argv, standalone_mode=False)
    finally:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        sys.stderr.write("\nBENCH " + json.dumps({
            "peak_rss_mib": usage.ru_maxrss / 1024,
            "worker_peak_rss_mib": children.ru_maxrss / 1024,
            "cpu_seconds": usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime,
        }) + "\n")


def prepare(store: Path) -> None:
    for graph, (dataset, splits) in GRAPHS.items():
        path = [] if dataset == "family" else ["--path", str(DATASETS / dataset)]
        subprocess.run([*KGENGINE, "load", dataset, *path, "--splits", splits, "--graph", graph,
                        "--store", str(store)], check=True, capture_output=True)


def run_case(store: Path, out: Path, graph: str, max_len: int, engine: str, threads: int,
             timeout: float) -> dict[str, Any]:
    tsv = out / f"{graph}-{max_len}-{engine}-{threads}.tsv"
    argv = ["mine", "--store", str(store), "--graph", graph, "--max-len", str(max_len),
            "--engine", engine, "--threads", str(threads), "-o", str(tsv)]
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, __file__, "--job", *argv], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"finished": False, "seconds": time.perf_counter() - started}
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed:\n{done.stderr[-3000:]}")
    usage = json.loads(done.stderr.rsplit("BENCH ", 1)[1])
    rules = sum(1 for line in tsv.read_text().splitlines()[1:] if line)
    return {"finished": True, "seconds": seconds, "rules": rules,
            "rules_per_second": rules / seconds, **usage}


def table(results: dict[str, Any]) -> str:
    lines = ["| KG | max-len | engine | threads | rules | wall s | rules/s | peak RSS MiB | "
             "AMIE 3 rules | AMIE 3 wall s | AMIE 3 RSS MiB | speed-up |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for case in results["cases"].values():
        amie_rules, amie_s, amie_rss, _ = AMIE3.get((case["graph"], case["max_len"]),
                                                    (None, None, None, ""))
        rss = case.get("peak_rss_mib")
        if rss is not None and case.get("worker_peak_rss_mib"):
            rss = f"{rss:.0f} + {case['threads']}x{case['worker_peak_rss_mib']:.0f}"
        elif rss is not None:
            rss = f"{rss:.0f}"
        speedup = f"{amie_s / case['seconds']:.1f}x" if amie_s and case.get("finished") else (
            "AMIE did not finish" if case.get("finished") and amie_rules else "")
        wall = f"{case['seconds']:.1f}" if case.get("finished") else f">{case['seconds']:.0f} (stopped)"
        lines.append(
            f"| {case['graph']} | {case['max_len']} | {case['engine']} | {case['threads']} | "
            f"{case.get('rules', '')} | {wall} | {case.get('rules_per_second', 0):.0f} | {rss or ''} | "
            f"{amie_rules or ''} | {amie_s or 'n/a'} | {f'{amie_rss:.0f}' if amie_rss else ''} | {speedup} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--query-fb", action="store_true", help="also the query engine on FB15k-237")
    parser.add_argument("--only", action="append", default=[], help="run only these case ids")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="per-case limit, seconds")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "mine.json")
    args = parser.parse_args()
    cases = {**CASES, **(QUERY_FB if args.query_fb else {})}
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only}
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_average_at_start": os.getloadavg()},
        "amie3_reference": {f"{g}-{m}": {"rules": r, "seconds": s, "peak_rss_mib": rss, "note": n}
                            for (g, m), (r, s, rss, n) in AMIE3.items()},
        "cases": {},
    }
    if args.output.exists():  # a partial run (--only) updates the cases it measures
        results["cases"] = json.loads(args.output.read_text()).get("cases", {})
    with tempfile.TemporaryDirectory(prefix="kgengine-bench-mine-") as tmp:
        store, out = Path(tmp) / "store", Path(tmp)
        prepare(store)
        for case_id, (graph, max_len, engine, threads) in cases.items():
            result = run_case(store, out, graph, max_len, engine, threads, args.timeout)
            results["cases"][case_id] = {"graph": graph, "max_len": max_len, "engine": engine,
                                         "threads": threads, **result}
            print(case_id, json.dumps(results["cases"][case_id]), flush=True)
            results["machine"]["load_average_at_end"] = os.getloadavg()
            save(results, args.output)  # after every case: a long run keeps what it measured
    print(table(results))


def save(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--job"]:
        job(sys.argv[2:])
    else:
        main()
