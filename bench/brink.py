"""BRINK build benchmark (not a test): time and peak RSS of ``kgengine brink build`` end to
end, rules given, on Family (facts.txt, the AMIE 3 reference rules bundled with kgengine) and
FB15k-237 (all splits, rules from ``bench/data/fb15k237_len4_rules.tsv``, mined once at
maximum length 4 when missing — 27,283 rules, 10 MB, not committed). FB15k-237 is built as the
official code builds it: ``--max-rules 300`` rules drawn at random (its
``grounding_sample.sh --max_rules 300``), rules up to ``--fb-max-len`` (default 4).

    .venv/bin/python bench/brink.py                      # both datasets
    .venv/bin/python bench/brink.py --datasets family    # quick
    .venv/bin/python bench/brink.py --no-mine            # skip FB15k-237 without a rules file
    .venv/bin/python bench/brink.py --fb-max-rules 0     # every mined rule (hours)

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("KGENGINE_SHARED", ROOT.parent / "shared")) / "datasets"
DATA = ROOT / "bench" / "data"
RESULTS = ROOT / "bench" / "results" / "brink.json"
FAMILY_RULES = ROOT / "engine" / "brink" / "data" / "family_amie3_len3.tsv"
FB_RULES = DATA / "fb15k237_len4_rules.tsv"
# dataset -> (loader name, directory, splits, graph)
SETUPS = {
    "family": ("family", DATASETS / "family", "facts", "family-facts"),
    "fb15k-237": ("fb15k-237", DATASETS / "fb15k-237", "train,valid,test", "fb15k-237"),
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
    from kgengine.brink.cli import mine_rules
    from kgengine.mining.io import write_tsv
    from kgengine.oxigraph_store import OxigraphStore

    graph = SETUPS[dataset][3]
    started = time.perf_counter()
    with OxigraphStore(store) as opened:
        rules = mine_rules(opened, graph, max_len=4, threads=os.cpu_count() or 1)
    write_tsv(rules, Path(out))
    return {"seconds": time.perf_counter() - started, "rules": len(rules),
            "peak_rss_mib": _peak_rss_mib()}


def job_build(dataset: str, store: str, rules: str, max_len: str, max_rules: str, out: str
              ) -> dict[str, Any]:
    import kgengine.brink.cli  # noqa: F401  (import time is not build time)
    from kgengine.cli import main

    graph = SETUPS[dataset][3]
    draw = ["--max-rules", max_rules] if int(max_rules) else []
    started = time.perf_counter()
    main(["brink", "build", "--store", store, "--graph", graph, "--rules", rules, "--max-len", max_len,
          *draw, "-o", out], standalone_mode=False)
    seconds = time.perf_counter() - started
    stats = json.loads((Path(out) / "stats.json").read_text())
    return {"seconds": seconds, "peak_rss_mib": _peak_rss_mib(), "stats": stats}


JOBS = {"load": job_load, "mine": job_mine, "build": job_build}


def run_job(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--job", *args], capture_output=True, text=True,
                          cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"job {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- the benchmark --------------------------------------------------------------------------
def bench(dataset: str, workdir: Path, allow_mine: bool, fb_max_len: int, fb_max_rules: int
          ) -> dict[str, Any] | None:
    store = str(workdir / f"store-{dataset}")
    rules = FAMILY_RULES if dataset == "family" else FB_RULES
    loaded = run_job("load", dataset, store)
    mined = None
    if not rules.is_file():
        if not allow_mine:
            print(f"{dataset}: no rules file {rules} (run without --no-mine to mine it once)")
            return None
        DATA.mkdir(parents=True, exist_ok=True)
        print(f"{dataset}: mining rules of length <= 4 once into {rules} ...", flush=True)
        mined = run_job("mine", dataset, store, str(rules))
    max_len, max_rules = (3, 0) if dataset == "family" else (fb_max_len, fb_max_rules)
    built = run_job("build", dataset, store, str(rules), str(max_len), str(max_rules),
                    str(workdir / f"out-{dataset}"))
    stats = built.pop("stats")
    return {
        "dataset": dataset,
        "rules_file": str(rules.relative_to(ROOT)),
        "max_rule_length": max_len,
        "max_rules": max_rules or None,
        "load_seconds": round(loaded["seconds"], 2),
        "mine": mined,
        "build_seconds": round(built["seconds"], 2),
        "build_peak_rss_mib": round(built["peak_rss_mib"], 1),
        "rules": stats["rules"]["by_type"]["total"],
        "rules_drawn": stats["rules"]["drawn"],
        "triples_complete": stats["triples"]["complete"],
        "triples_incomplete": stats["triples"]["incomplete"],
        "questions": {k: stats["questions"][k] for k in ("total", "train", "valid", "test")},
        "answerability": stats["answerability"]["fraction"],
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| dataset | rules (max length) | drawn | complete | incomplete | "
             "questions (train/valid/test) | build s | peak RSS MiB | answerable |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        q = r["questions"]
        lines.append(f"| {r['dataset']} | {r['rules']:,} ({r['max_rule_length']}) | {r['rules_drawn']:,} | "
                     f"{r['triples_complete']:,} | {r['triples_incomplete']:,} | "
                     f"{q['total']:,} ({q['train']:,}/{q['valid']:,}/"
                     f"{q['test']:,}) | {r['build_seconds']:.1f} | {r['build_peak_rss_mib']:.0f} | "
                     f"{r['answerability']:.0%} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--datasets", default="family,fb15k-237")
    parser.add_argument("--no-mine", action="store_true", help="never mine FB15k-237 rules here")
    parser.add_argument("--fb-max-len", type=int, default=4, help="FB15k-237: longest rules used")
    parser.add_argument("--fb-max-rules", type=int, default=300,
                        help="FB15k-237: rules drawn (--max-rules; 0: all)")
    args = parser.parse_args()
    if args.job:
        name, *rest = args.job
        print(json.dumps(JOBS[name](*rest)))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="kgengine-bench-brink-"))
    try:
        rows = [r for d in args.datasets.split(",")
                if (r := bench(d.strip(), workdir, not args.no_mine, args.fb_max_len, args.fb_max_rules))]
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
