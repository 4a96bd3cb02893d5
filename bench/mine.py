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


def run_ours(store: Path, work: Path, graph: str, max_len: int, engine: str,
             timeout: float) -> dict[str, Any]:
    out = work / f"ours-{graph}-{max_len}-{engine}.tsv"
    argv = ["mine", "--store", str(store), "--graph", graph, "--max-len", str(max_len), "--engine", engine,
            "-o", str(out)]
    result = measure.run_measured([*KGENGINE, *argv], timeout, stderr=work / "ours.log")
    if result["finished"] and result["returncode"] != 0:
        raise RuntimeError(f"kgengine {' '.join(argv)} failed:\n{(work / 'ours.log').read_text()[-3000:]}")
    return {**result, "output": str(out)}


def run_amie(jar: Path, tsv: Path, work: Path, max_len: int, timeout: float) -> dict[str, Any]:
    out = work / f"amie-{tsv.stem}-{max_len}.out"
    command = ["java", "-jar", str(jar), *AMIE_THRESHOLDS, "-maxad", str(max_len), str(tsv)]
    result = measure.run_measured(command, timeout, stdout=out, stderr=work / "amie.log")
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


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get("finished") and r.get(key) is not None]
    return statistics.median(values) if values else None


def table(results: dict[str, Any]) -> str:
    lines = ["| case | engine | rules | wall s | peak PSS MiB | AMIE 3 rules | AMIE 3 wall s | "
             "AMIE 3 PSS MiB | speed-up | memory ratio | identical |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for case_id, case in results["cases"].items():
        ours, amie = case["ours"], case.get("amie") or []
        wall, pss = median(ours, "seconds"), median(ours, "peak_pss_mib")
        amie_wall, amie_pss = median(amie, "seconds"), median(amie, "peak_pss_mib")
        stopped = [r for r in amie if not r["finished"]]
        amie_cell = (f"{amie_wall:.1f}" if amie_wall else
                     f">{stopped[0]['seconds']:.0f} (stopped)" if stopped else "")
        identity = case.get("identity")
        same = "" if identity is None else "yes" if identity["identical"] else (
            f"no: {len(identity['only_ours'])} ours only, {len(identity['only_amie'])} AMIE only, "
            f"{len(identity['measures_differ'])} other measures")
        lines.append(
            f"| {case_id} | {case['engine']} | {case.get('rules', '')} | "
            f"{f'{wall:.1f}' if wall else 'stopped'} | {f'{pss:.0f}' if pss else ''} | "
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
    args = parser.parse_args()
    cases = {k: v for k, v in CASES.items() if not args.only or k in args.only}
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_average_at_start": os.getloadavg()},
        "amie_jar": str(args.amie) if args.amie else None,
        "cases": {},
    }
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
            with_amie = args.amie is not None and engine == "matrix"
            for _ in range(args.repeats):
                case["ours"].append(run_ours(store, work, graph, max_len, engine, args.timeout))
                if with_amie:
                    case["amie"].append(run_amie(args.amie, tsv[graph], work, max_len, args.amie_timeout))
            last = case["ours"][-1]
            if last["finished"]:
                ours_rules = rule_measures(Path(last["output"]))
                case["rules"] = len(ours_rules)
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
