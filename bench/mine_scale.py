"""Mining at Wikidata5m scale (not a test): the planted-rule synthetic KG of
tests/synthetic_kg.py, loaded into Oxigraph and mined with the real CLI.

Steps, each the real ``kgengine`` in a subprocess whose memory is sampled (the summed PSS of
the process and its forked workers, so shared index pages count once; peak RSS beside it):

1. generate the KG (numpy) and write it as Wikidata5m's files;
2. ``kgengine load wikidata5m``;
3. ``kgengine mine --max-len 3`` at BRINK's thresholds (the defaults);
4. every planted rule that passes the thresholds (measures computed exactly by numpy on the
   generated facts) must be in the output with exactly those measures;
5. a seeded sample of output rules: support, body size and PCA body size counted again by
   SPARQL on the store (the query engine) must equal the miner's;
6. ``kgengine brink build --rules ... --max-rules N`` on the same graph;
7. optionally ``--max-len 4`` under a time limit (how far it goes).

    .venv/bin/python bench/mine_scale.py                      # 21M triples (about 1 hour)
    .venv/bin/python bench/mine_scale.py --triples 2000000   # a tenth, ~5 min

Prints a table and writes ``bench/results/mine_scale-<triples>.json``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
import measure  # noqa: E402
from synthetic_kg import planted_kg, write_wikidata5m  # noqa: E402

KGENGINE = [sys.executable, "-m", "kgengine.cli"]


def run_measured(argv: list[str], timeout: float | None = None, log: Path | None = None) -> dict[str, Any]:
    """``kgengine argv`` measured (bench/measure.py), its output to ``log``."""
    return {"argv": argv, **measure.run_measured([*KGENGINE, *argv], timeout, stdout=log, stderr=log)}


def verify_sample(store_dir: Path, graph: str, rules_file: Path, sample: int, seed: int) -> dict[str, Any]:
    """Support, body size and PCA body size of a seeded sample of rules, by SPARQL."""
    from kgengine.mining.io import read_rules
    from kgengine.mining.search import counting_engine
    from kgengine.store import open_store, resolve_graph

    rules = read_rules(rules_file)
    drawn = random.Random(seed).sample(rules, min(sample, len(rules)))
    store = open_store(str(store_dir), read_only=True, create=False)
    engine = counting_engine(store, resolve_graph(store, graph), "query")
    checked = []
    for rule in drawn:
        head = rule.rule.head
        atoms = (head, *rule.rule.body)
        started = time.perf_counter()
        support = engine.body_size((head, head, *rule.rule.body))  # body and head
        body = engine.body_size(atoms)
        pca = engine.pca_body_size(atoms, rule.functional_variable == head.subject)
        checked.append({"rule": str(rule.rule), "mined": [rule.support, rule.body_size, rule.pca_body_size],
                        "sparql": [support, body, pca], "seconds": time.perf_counter() - started,
                        "equal": [support, body, pca] == [rule.support, rule.body_size, rule.pca_body_size]})
    store.close()
    return {"rules": checked, "all_equal": all(c["equal"] for c in checked)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triples", type=int, default=21_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="mining threads [default: the cores]")
    parser.add_argument("--sample", type=int, default=12, help="output rules re-counted by SPARQL")
    parser.add_argument("--brink-rules", type=int, default=50, help="brink build --max-rules (0: no build)")
    parser.add_argument("--len4-timeout", type=float, default=0, help="also max-len 4, up to this many s")
    parser.add_argument("--workdir", type=Path, default=None, help="keep files here [default: a temp dir]")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--resume", action="store_true",
                        help="with --workdir: keep the steps an earlier run there finished")
    args = parser.parse_args()
    output = args.output or ROOT / "bench" / "results" / f"mine_scale-{args.triples}.json"
    results: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_average_at_start": os.getloadavg()},
        "steps": {}}
    if args.resume and output.exists():
        earlier = json.loads(output.read_text())
        results["steps"] = {k: v for k, v in earlier["steps"].items()
                            if v.get("returncode", 0) == 0 and v.get("finished", True)}

    def done(step: str) -> bool:
        return args.resume and step in results["steps"]

    def save() -> None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=1) + "\n")

    with tempfile.TemporaryDirectory(prefix="kgengine-mine-scale-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        files, store = work / "wikidata5m", work / "store"
        threads = [] if args.threads is None else ["--threads", str(args.threads)]
        started = time.perf_counter()
        kg = planted_kg(args.triples, seed=args.seed)
        if not done("load"):
            write_wikidata5m(kg, files)
        expected = kg.expected()
        results["graph"] = {"triples": kg.triples, "entities": kg.entities, "relations": len(kg.facts),
                            "hub_relation_facts": len(kg.facts[31]), "planted": len(kg.planted),
                            "planted_passing_thresholds": len(expected),
                            "generate_seconds": time.perf_counter() - started}
        print("graph", json.dumps(results["graph"]), flush=True)
        steps = results["steps"]
        if not done("load"):
            steps["load"] = run_measured(["load", "wikidata5m", "--path", str(files), "--graph", "syn",
                                          "--store", str(store)], log=work / "load.log")
            print("load", json.dumps(steps["load"]), flush=True)
            save()
        rules3 = work / "rules-3.tsv"
        if not done("mine-3"):
            steps["mine-3"] = run_measured(["mine", "--store", str(store), "--graph", "syn", "--max-len",
                                            "3", *threads, "-o", str(rules3)], log=work / "mine-3.log")
            print("mine-3", json.dumps(steps["mine-3"]), flush=True)
            save()
        if steps["mine-3"]["returncode"] == 0 and not done("verify-3"):
            from kgengine.mining.io import read_rules

            found = {r.rule: r for r in read_rules(rules3)}
            missing, different = [], []
            for rule, m in expected.items():
                got = found.get(rule)
                if got is None:
                    missing.append(str(rule))
                elif (got.support, got.body_size, got.pca_body_size) != (
                        m.support, m.body_size, m.pca_body_size):
                    different.append(str(rule))
            steps["mine-3"].update(rules=len(found), planted_found=len(expected) - len(missing),
                                   planted_missing=missing, planted_measures_different=different)
            steps["verify-3"] = verify_sample(store, "syn", rules3, args.sample, args.seed)
            print("verify", json.dumps({"all_equal": steps["verify-3"]["all_equal"]}), flush=True)
            save()
        if steps["mine-3"]["returncode"] == 0 and args.brink_rules and not done("brink"):
            steps["brink"] = run_measured(["brink", "build", "--store", str(store), "--graph", "syn",
                                           "--rules", str(rules3), "--max-rules", str(args.brink_rules),
                                           "--labels", "id", "-o", str(work / "brink")],
                                          log=work / "brink.log")
            print("brink", json.dumps(steps["brink"]), flush=True)
            save()
        if args.len4_timeout:
            steps["mine-4"] = run_measured(["mine", "--store", str(store), "--graph", "syn", "--max-len", "4",
                                            *threads, "-o", str(work / "rules-4.tsv")],
                                           timeout=args.len4_timeout, log=work / "mine-4.log")
            log = (work / "mine-4.log").read_text(errors="replace").strip().splitlines()
            steps["mine-4"]["last_progress"] = log[-1][-300:] if log else ""
            save()
    results["machine"]["load_average_at_end"] = os.getloadavg()
    save()
    print(table(results))
    return 0


def table(results: dict[str, Any]) -> str:
    g = results["graph"]
    lines = [f"synthetic KG: {g['triples']:,} triples, {g['entities']:,} entities, "
             f"{g['relations']} relations "
             f"(P31 {g['hub_relation_facts']:,} facts), {g['planted_passing_thresholds']}/{g['planted']} "
             "planted rules pass the thresholds", "",
             "| step | wall s | peak PSS MiB | peak RSS MiB (sum) | result |", "|---|---|---|---|---|"]
    for name, step in results["steps"].items():
        if "seconds" not in step:
            continue
        if name.startswith("mine") and "rules" in step:
            result = (f"{step['rules']:,} rules; planted found {step['planted_found']}/"
                      f"{g['planted_passing_thresholds']}, measures differ: "
                      f"{len(step['planted_measures_different'])}")
        elif not step["finished"]:
            result = f"stopped at the limit; {step.get('last_progress', '')[:80]}"
        else:
            result = "ok" if step["returncode"] == 0 else f"exit {step['returncode']}"
        lines.append(f"| {name} | {step['seconds']:.0f} | {step['peak_pss_mib']:.0f} | "
                     f"{step['peak_rss_mib']:.0f} | {result} |")
    verify = results["steps"].get("verify-3")
    if verify:
        equal = sum(c["equal"] for c in verify["rules"])
        lines.append(f"\nSPARQL re-count of {len(verify['rules'])} sampled rules: {equal} equal")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
