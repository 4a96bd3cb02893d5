"""Rule-mining benchmark (not a test): ``kgengine mine`` against the real AMIE 3, same run.

Each graph is loaded into a fresh Oxigraph store and exported (``kgengine export``) as the
TSV that AMIE 3 reads, so both tools mine the same triples. Per case the two tools run
alternately (``--repeats`` times each: ours, AMIE, ours, AMIE, ...), both at their defaults
(threads: the cores) with BRINK's thresholds (``-minc 0.3 -minpca 0.4 -minhc 0.1``; ours are
the defaults), and for each run the wall time (process start to exit, reading the input
included) and the peak summed PSS of its process tree (bench/measure.py) are taken; the table
shows medians. The rules are compared as canonical rules with their support, body size and
PCA body size: any rule found by one tool only, or with other measures, is printed by name.

AMIE 3 is built from its source outside this repository (never committed; docs/mining.md
says how), e.g. /work/amie-build/bin/amie3.jar:

    .venv/bin/python bench/mine.py --amie /path/to/amie3.jar
    .venv/bin/python bench/mine.py --amie JAR --only fb15k-237-3 --repeats 3
    .venv/bin/python bench/mine.py                    # ours only (no AMIE columns)
    .venv/bin/python bench/mine.py --amie JAR --baseline /tmp/baseline/pkg   # and an older kgengine

``--baseline DIR`` also runs, in the same alternation, the ``kgengine`` importable from DIR (a
``PYTHONPATH`` entry; e.g. ``git archive`` of an older commit with ``engine/`` copied to
``DIR/kgengine`` and ``loaders/``, ``sparql/``, ``cypher/`` inside it): before/after on the same
store, the same load and the same machine load. The start-up of each (``kgengine --help``, the
median of 5 runs) is measured too.

Cases: Family facts.txt and FB15k-237 at max-len 3, Family (all splits) and a dense small KG
(120 entities, 40 relations, 10,000 triples; tests/synthetic_kg.py) at max-len 4, FB15k-237
at max-len 4 (AMIE 3 under ``--amie-timeout``), and the query engine (SPARQL counting on the
store) on Family facts beside the matrix engine.

Prints a table and writes ``bench/results/mine.json``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the one shared-data lookup (tests/shared_data.py)
sys.path.insert(0, str(ROOT / "bench"))
import measure  # noqa: E402
from shared_data import DATASETS  # noqa: E402
from synthetic_kg import dense_kg  # noqa: E402

KGENGINE = [sys.executable, "-m", "kgengine.cli"]
AMIE_THRESHOLDS = ["-minc", "0.3", "-minpca", "0.4", "-minhc", "0.1"]

# graph -> (dataset, splits)
GRAPHS = {
    "family-facts": ("family", "facts"),
    "family": ("family", "facts,train,valid,test"),
    "fb15k-237": ("fb15k-237", "train,valid,test"),
    "dense": ("tsv", ""),
}
# case id -> (graph, max_len, engine)
CASES = {
    "family-facts-3": ("family-facts", 3, "matrix"),
    "family-facts-3-query": ("family-facts", 3, "query"),
    "fb15k-237-3": ("fb15k-237", 3, "matrix"),
    "family-4": ("family", 4, "matrix"),
    "dense-4": ("dense", 4, "matrix"),
    "fb15k-237-4": ("fb15k-237", 4, "matrix"),
}


def prepare(store: Path, work: Path, graphs: set[str]) -> dict[str, Path]:
    """Load each graph; return its exported TSV (what AMIE reads)."""
    tsv = {}
    for graph in sorted(graphs):
        dataset, splits = GRAPHS[graph]
        if dataset == "tsv":
            path = work / "dense-input.tsv"
            kg = dense_kg()
            path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in kg))
            argv = ["load", "tsv", "--path", str(path)]
        else:
            argv = ["load", dataset, "--splits", splits]
            if dataset != "family":
                argv += ["--path", str(DATASETS / dataset)]
        subprocess.run([*KGENGINE, *argv, "--graph", graph, "--store", str(store)], check=True,
                       capture_output=True)
        tsv[graph] = work / f"{graph}.tsv"
        subprocess.run([*KGENGINE, "export", graph, "--store", str(store), "-o", str(tsv[graph])],
                       check=True, capture_output=True)
    return tsv


# poll the process tree this often: a 0.2 s poll would add up to 0.2 s to a 0.5 s run's wall time
POLL = 0.05


def with_path(command: list[str], baseline: Path | None) -> list[str]:
    """``command`` run with ``baseline`` first on PYTHONPATH (the older kgengine), if given."""
    return command if baseline is None else ["env", f"PYTHONPATH={baseline}", *command]


def run_ours(store: Path, work: Path, graph: str, max_len: int, engine: str,
             timeout: float, baseline: Path | None = None) -> dict[str, Any]:
    tag = "baseline" if baseline else "ours"
    out = work / f"{tag}-{graph}-{max_len}-{engine}.tsv"
    argv = ["mine", "--store", str(store), "--graph", graph, "--max-len", str(max_len), "--engine", engine,
            "-o", str(out)]
    result = measure.run_measured(with_path([*KGENGINE, *argv], baseline), timeout,
                                  stderr=work / f"{tag}.log", interval=POLL)
    if result["finished"] and result["returncode"] != 0:
        raise RuntimeError(f"kgengine {' '.join(argv)} failed:\n{(work / f'{tag}.log').read_text()[-3000:]}")
    return {**result, "output": str(out)}


def run_amie(jar: Path, tsv: Path, work: Path, max_len: int, timeout: float) -> dict[str, Any]:
    out = work / f"amie-{tsv.stem}-{max_len}.out"
    command = ["java", "-jar", str(jar), *AMIE_THRESHOLDS, "-maxad", str(max_len), str(tsv)]
    result = measure.run_measured(command, timeout, stdout=out, stderr=work / "amie.log", interval=POLL)
    text = out.read_text(errors="replace")
    reported = re.search(r"Mining done in ([\d.]+) (m?s)", text)
    if reported:
        value = float(reported.group(1))
        result["amie_reported_mining_seconds"] = value / 1000 if reported.group(2) == "ms" else value
    return {**result, "output": str(out)}


def rule_measures(path: Path) -> dict[str, tuple[int, int, int]]:
    """Canonical rule text -> (support, body size, PCA body size); AMIE stdout or ours."""
    from kgengine.mining.io import parse_rules_text

    text = path.read_text(errors="replace")
    # AMIE's stdout: only its rule lines (a run stopped at the limit has no summary lines)
    lines = [line for line in text.splitlines() if "=>" in line or line.startswith("Rule\t")]
    return {str(r.rule): (r.support, r.body_size, r.pca_body_size)
            for r in parse_rules_text("\n".join(lines) + "\n", str(path))}


def compare(ours: dict[str, tuple[int, int, int]], amie: dict[str, tuple[int, int, int]]) -> dict[str, Any]:
    only_ours = sorted(set(ours) - set(amie))
    only_amie = sorted(set(amie) - set(ours))
    different = sorted(r for r in set(ours) & set(amie) if ours[r] != amie[r])
    return {"identical": not (only_ours or only_amie or different), "only_ours": only_ours,
            "only_amie": only_amie, "measures_differ": different}


def startup(baseline: Path | None, runs: int = 5) -> float:
    """Median wall seconds of ``kgengine --help`` (interpreter start and the CLI's imports)."""
    import time

    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(with_path([*KGENGINE, "--help"], baseline), check=True, capture_output=True)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get("finished") and r.get(key) is not None]
    return statistics.median(values) if values else None


def table(results: dict[str, Any]) -> str:
    lines = ["| case | engine | rules | wall s | peak PSS MiB | before s | vs before | AMIE 3 rules | "
             "AMIE 3 wall s | AMIE 3 PSS MiB | speed-up | memory ratio | identical |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for case_id, case in results["cases"].items():
        ours, amie = case["ours"], case.get("amie") or []
        wall, pss = median(ours, "seconds"), median(ours, "peak_pss_mib")
        before = median(case.get("baseline") or [], "seconds")
        before_cells = (f"{before:.1f} | {before / wall:.1f}x" if before and wall else
                        "stopped | " if case.get("baseline") else " | ")
        amie_wall, amie_pss = median(amie, "seconds"), median(amie, "peak_pss_mib")
        stopped = [r for r in amie if not r["finished"]]
        amie_cell = (f"{amie_wall:.2f}" if amie_wall else
                     f">{stopped[0]['seconds']:.0f} (stopped)" if stopped else "")
        identity = case.get("identity")
        same = "" if identity is None else "yes" if identity["identical"] else (
            f"no: {len(identity['only_ours'])} ours only, {len(identity['only_amie'])} AMIE only, "
            f"{len(identity['measures_differ'])} other measures")
        lines.append(
            f"| {case_id} | {case['engine']} | {case.get('rules', '')} | "
            f"{f'{wall:.2f}' if wall else 'stopped'} | {f'{pss:.0f}' if pss else ''} | {before_cells} | "
            f"{case.get('amie_rules', '')} | {amie_cell} | {f'{amie_pss:.0f}' if amie_pss else ''} | "
            f"{f'{amie_wall / wall:.1f}x' if amie_wall and wall else ''} | "
            f"{f'{amie_pss / pss:.1f}x' if amie_pss and pss else ''} | {same} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--amie", type=Path, help="AMIE 3 jar (built outside the repository)")
    parser.add_argument("--only", action="append", default=[], help="run only these case ids")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs per tool")
    parser.add_argument("--timeout", type=float, default=3600, help="per run of ours, seconds")
    parser.add_argument("--amie-timeout", type=float, default=1200, help="per AMIE 3 run, seconds")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "mine.json")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="PYTHONPATH entry holding an older kgengine to run alongside (before/after)")
    args = parser.parse_args()
    cases = {k: v for k, v in CASES.items() if not args.only or k in args.only}
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_average_at_start": os.getloadavg()},
        "amie_jar": str(args.amie) if args.amie else None,
        "baseline": str(args.baseline) if args.baseline else None,
        "startup_seconds": {"ours": startup(None)},
        "cases": {},
    }
    if args.baseline:
        results["startup_seconds"]["baseline"] = startup(args.baseline)
    print("kgengine --help:", json.dumps(results["startup_seconds"]), flush=True)
    if args.output.exists():  # a partial run (--only) updates the cases it measures
        earlier = json.loads(args.output.read_text()).get("cases", {})
        results["cases"] = {k: v for k, v in earlier.items() if k in CASES and "ours" in v}
    with tempfile.TemporaryDirectory(prefix="kgengine-bench-mine-") as tmp:
        work = Path(tmp)
        store = work / "store"
        tsv = prepare(store, work, {graph for graph, _, _ in cases.values()})
        for case_id, (graph, max_len, engine) in cases.items():
            case: dict[str, Any] = {"graph": graph, "max_len": max_len, "engine": engine,
                                    "triples": sum(1 for _ in tsv[graph].open()), "ours": [], "amie": []}
            if args.baseline:
                case["baseline"] = []
            with_amie = args.amie is not None and engine == "matrix"
            for _ in range(args.repeats):
                case["ours"].append(run_ours(store, work, graph, max_len, engine, args.timeout))
                if args.baseline:
                    case["baseline"].append(run_ours(store, work, graph, max_len, engine, args.timeout,
                                                     args.baseline))
                if with_amie:
                    case["amie"].append(run_amie(args.amie, tsv[graph], work, max_len, args.amie_timeout))
            last = case["ours"][-1]
            if last["finished"]:
                ours_rules = rule_measures(Path(last["output"]))
                case["rules"] = len(ours_rules)
                if args.baseline and case["baseline"][-1]["finished"]:
                    before = rule_measures(Path(case["baseline"][-1]["output"]))
                    case["same_as_baseline"] = compare(ours_rules, before)["identical"]
                if with_amie:
                    amie_rules = rule_measures(Path(case["amie"][-1]["output"]))
                    case["amie_rules"] = len(amie_rules)
                    case["identity"] = compare(ours_rules, amie_rules)
                    if not case["amie"][-1]["finished"]:  # a stopped AMIE printed a subset
                        case["identity"]["amie_stopped"] = True
                        case["identity"]["amie_rules_in_ours"] = sum(r in ours_rules for r in amie_rules)
                        case["identity"]["identical"] = False
            results["cases"][case_id] = case
            print(case_id, json.dumps({k: v for k, v in case.items() if k not in ("ours", "amie")})[:2000],
                  flush=True)
            results["machine"]["load_average_at_end"] = os.getloadavg()
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
