"""Every row of the README's benchmark table in one run (a benchmark, not a test): each
benchmark script in turn, as the README names it, with the time each took and what failed.
About two hours on 2 cores, most of it AMIE 3 on the dense KG (stopped at 900 s) and the
21M-triple synthetic Wikidata5m; the rows an issue asks about come first, so a run cut short
still has them.

    .venv/bin/python bench/all.py --amie JAR [--skip scale,neo4j] [--only mine-3,eval]
    make bench AMIE=JAR

Each script writes its own ``bench/results/*.json``; this one writes
``bench/results/all.json`` (start, end, and per step its command, seconds and exit status).
Without ``--amie`` the mining steps run kgengine alone. Steps run one at a time: anything
else running on the machine shows in every figure (each result records the load average)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def steps(amie: Path | None, scale_triples: int | None = None) -> dict[str, list[str]]:
    """step id -> the benchmark's arguments; ``None`` AMIE: kgengine alone; ``scale_triples``:
    the synthetic Wikidata5m's size in the scale step (its default, 21M, when None)."""
    with_amie = ["--amie", str(amie)] if amie else []
    return {
        # issue 20's mining targets: medians of 3 where a run takes seconds
        "mine-3": ["mine.py", *with_amie, "--only", "family-facts-3", "--only", "fb15k-237-3",
                   "--only", "family-facts-3-query", "--repeats", "3"],
        "mine-4": ["mine.py", *with_amie, "--only", "family-4", "--only", "dense-4",
                   "--amie-timeout", "900"],
        # AMIE 3 takes over 50 min here (issue 14): kgengine alone
        "mine-fb15k-4": ["mine.py", "--only", "fb15k-237-4"],
        "eval": ["eval.py", "--brink", "family,fb15k-237"],
        "ask": ["ask.py", "--no-neo4j"],
        "brink": ["brink.py"],
        "load": ["load.py"],
        "neo4j": ["neo4j.py"],
        "serve": ["serve.py"],
        # max-len 3 only: the BRINK build at this scale adds ~35 min and is not a table row
        "scale": ["mine_scale.py", "--brink-rules", "0",
                  *(["--triples", str(scale_triples)] if scale_triples else [])],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--amie", type=Path, help="AMIE 3 jar (built outside the repository)")
    parser.add_argument("--skip", default="", help="comma-separated step ids to leave out")
    parser.add_argument("--only", default="", help="comma-separated step ids to run")
    parser.add_argument("--scale-triples", type=int, default=None,
                        help="size of the scale step's synthetic graph [its default: 21M, over an hour]")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "all.json")
    args = parser.parse_args()
    if args.amie is not None and not args.amie.is_file():
        parser.error(f"--amie: no such file: {args.amie}")
    if args.scale_triples is not None and args.scale_triples <= 0:
        parser.error("--scale-triples must be positive")
    plan = steps(args.amie, args.scale_triples)
    chosen = [s for s in (args.only.split(",") if args.only else plan) if s]
    skip = set(filter(None, args.skip.split(",")))
    unknown = sorted((set(chosen) | skip) - set(plan))
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; steps: {', '.join(plan)}")
    chosen = [s for s in chosen if s not in skip]
    if not chosen:
        parser.error("no step left to run (--only and --skip leave none)")
    record: dict[str, Any] = {"started": datetime.now(UTC).isoformat(timespec="seconds"),
                              "amie_jar": str(args.amie) if args.amie else None,
                              "commit": _commit(), "steps": {}}
    for step in chosen:
        command = [sys.executable, f"bench/{plan[step][0]}", *plan[step][1:]]
        print(f"\n>>> {step}: {' '.join(command[1:])}  ({datetime.now(UTC):%H:%M:%S} UTC, "
              f"load {os.getloadavg()[0]:.1f})", flush=True)
        start = time.perf_counter()
        status = subprocess.run(command, cwd=ROOT).returncode
        seconds = round(time.perf_counter() - start, 1)
        record["steps"][step] = {"command": " ".join(["python", *command[1:]]), "seconds": seconds,
                                 "status": status}
        print(f"=== {step}: {'ok' if status == 0 else f'FAILED ({status})'} in {seconds:.0f} s",
              flush=True)
        record["ended"] = datetime.now(UTC).isoformat(timespec="seconds")
        args.output.write_text(json.dumps(record, indent=1) + "\n")
    failed = [s for s, r in record["steps"].items() if r["status"] != 0]
    print("\n" + "\n".join(f"{s:14} {r['seconds']:8.0f} s  {'ok' if r['status'] == 0 else 'FAILED'}"
                           for s, r in record["steps"].items()))
    sys.exit(1 if failed else 0)


def _commit() -> str | None:
    """The checked-out commit the run measures (``+dirty`` when tracked files differ from it)."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty=+dirty", "--exclude", "*"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


if __name__ == "__main__":
    main()
