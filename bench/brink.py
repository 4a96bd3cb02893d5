"""BRINK build benchmark (not a test): time and peak RSS of ``kgengine brink build`` end to
end, rules given, on Family (facts.txt, the AMIE 3 reference rules bundled with kgengine) and
FB15k-237 (all splits, rules from ``bench/data/fb15k237_len4_rules.tsv``, mined once at
maximum length 4 when missing — 27,283 rules, 10 MB, not committed). FB15k-237 is built as the
official code builds it: 300 rules drawn at random (its ``grounding_sample.sh --max_rules
300``, our ``--max-rules 300``), one question per kept grounding, from the rules of length <= 3
(AMIE 3's 1,262) and from all of them.

    .venv/bin/python bench/brink.py                              # every case
    .venv/bin/python bench/brink.py --cases family               # quick
    .venv/bin/python bench/brink.py --no-mine                    # skip FB15k-237 without a rules file

Every measured job (load, mine, build) runs in its own subprocess, so its peak RSS is its
own. Prints a table and writes ``bench/results/brink.json``. Data come from
``$KGENGINE_SHARED/datasets`` (default ``../shared/datasets``)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the one shared-data lookup (tests/shared_data.py)
from shared_data import DATASETS  # noqa: E402

DATA = ROOT / "bench" / "data"
RESULTS = ROOT / "bench" / "results" / "brink.json"
FAMILY_RULES = ROOT / "engine" / "brink" / "data" / "family_amie3_len3.tsv"
FB_RULES = DATA / "fb15k237_len4_rules.tsv"
# dataset -> (loader name, directory, splits, graph)
SETUPS = {
    "family": ("family", DATASETS / "family", "facts", "family-facts"),
    "fb15k-237": ("fb15k-237", DATASETS / "fb15k-237", "train,valid,test", "fb15k-237"),
}
# case -> (dataset, longest rules used, --max-rules (0: all), --question-unit)
CASES = {
    "family": ("family", 3, 0, "triple"),
    "fb15k-237-len3-300": ("fb15k-237", 3, 300, "grounding"),
    "fb15k-237-len4-300": ("fb15k-237", 4, 300, "grounding"),
}


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


# ---- jobs (each in a fresh subprocess: `brink.py --job NAME ...`) ----------------------------
def job_load(dataset: str, store: str) -> dict[str, Any]:
    from kgengine.cli import main

    loader, path, splits, graph = SETUPS[dataset]
    started = time.perf_counter()
    main(["load", loader, "--path", str(path), "--splits", splits, "--store", store, "--graph", graph],
         standalone_mode=False)
    return {"seconds": time.perf_counter() - started, "peak_rss_mib": _peak_rss_mib()}


def job_mine(dataset: str, store: str, out: str) -> dict[str, Any]:
    from kgengine.brink.build import mine_rules
    from kgengine.mining.io import write_tsv
    from kgengine.oxigraph.store import OxigraphStore

    graph = SETUPS[dataset][3]
    started = time.perf_counter()
    with OxigraphStore(store) as opened:
        rules = mine_rules(opened, graph, max_len=4, threads=os.cpu_count() or 1)
    write_tsv(rules, Path(out))
    return {"seconds": time.perf_counter() - started, "rules": len(rules),
            "peak_rss_mib": _peak_rss_mib()}


def job_build(dataset: str, store: str, rules: str, max_len: str, max_rules: str, unit: str,
              out: str) -> dict[str, Any]:
    import kgengine.commands.brink  # noqa: F401  (import time is not build time)
    from kgengine.cli import main

    graph = SETUPS[dataset][3]
    draw = ["--max-rules", max_rules] if int(max_rules) else []
    started = time.perf_counter()
    main(["brink", "build", "--store", store, "--graph", graph, "--rules", rules, "--max-len", max_len,
          *draw, "--question-unit", unit, "-o", out], standalone_mode=False)
    seconds = time.perf_counter() - started
    stats = json.loads((Path(out) / "stats.json").read_text())
    return {"seconds": seconds, "peak_rss_mib": _peak_rss_mib(), "stats": stats}


# a job runs in its own process, its arguments from the command line
JOBS: dict[str, Callable[..., dict[str, Any]]] = {"load": job_load, "mine": job_mine, "build": job_build}


def run_job(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--job", *args], capture_output=True, text=True,
                          cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"job {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- the benchmark --------------------------------------------------------------------------
def bench(case: str, workdir: Path, allow_mine: bool, loads: dict[str, dict[str, Any]]
          ) -> dict[str, Any] | None:
    dataset, max_len, max_rules, unit = CASES[case]
    store = str(workdir / f"store-{dataset}")
    rules = FAMILY_RULES if dataset == "family" else FB_RULES
    if dataset not in loads:
        loads[dataset] = run_job("load", dataset, store)
    loaded = loads[dataset]
    mined = None
    if not rules.is_file():
        if not allow_mine:
            print(f"{dataset}: no rules file {rules} (run without --no-mine to mine it once)")
            return None
        DATA.mkdir(parents=True, exist_ok=True)
        print(f"{dataset}: mining rules of length <= 4 once into {rules} ...", flush=True)
        mined = run_job("mine", dataset, store, str(rules))
    built = run_job("build", dataset, store, str(rules), str(max_len), str(max_rules), unit,
                    str(workdir / f"out-{case}"))
    stats = built.pop("stats")
    return {
        "case": case,
        "dataset": dataset,
        "question_unit": unit,
        "rules_file": str(rules.relative_to(ROOT)),
        "max_rule_length": max_len,
        "max_rules": max_rules or None,
        "load_seconds": round(loaded["seconds"], 2),
        "mine": mined,
        "build_seconds": round(built["seconds"], 2),
        "build_peak_rss_mib": round(built["peak_rss_mib"], 1),
        "rules": stats["rules"]["by_type"]["total"],
        "rules_with_groundings": stats["rules"]["with_groundings"],
        "rules_drawn": stats["rules"]["drawn"],
        "triples_complete": stats["triples"]["complete"],
        "triples_incomplete": stats["triples"]["incomplete"],
        "questions": {k: stats["questions"][k] for k in ("total", "train", "valid", "test")},
        "answerability": stats["answerability"]["fraction"],
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| dataset | rules (max length) | grounded | question per | complete | incomplete | "
             "questions (train/valid/test) | build s | peak RSS MiB | answerable |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        q = r["questions"]
        lines.append(f"| {r['dataset']} | {r['rules']:,} ({r['max_rule_length']}) | "
                     f"{r['rules_with_groundings']:,} | {r['question_unit']} | "
                     f"{r['triples_complete']:,} | {r['triples_incomplete']:,} | "
                     f"{q['total']:,} ({q['train']:,}/{q['valid']:,}/"
                     f"{q['test']:,}) | {r['build_seconds']:.1f} | {r['build_peak_rss_mib']:.0f} | "
                     f"{r['answerability']:.0%} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--no-mine", action="store_true", help="never mine FB15k-237 rules here")
    args = parser.parse_args()
    if args.job:
        name, *rest = args.job
        print(json.dumps(JOBS[name](*rest)))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="kgengine-bench-brink-"))
    loads: dict[str, dict[str, Any]] = {}
    try:
        rows = [r for c in args.cases.split(",") if (r := bench(c.strip(), workdir, not args.no_mine, loads))]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(table(rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(),
                    # timings on a shared machine mean little without its load
                    "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "results": rows,
    }, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
