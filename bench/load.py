"""Load benchmark (not a test): ``kgengine load`` against pyoxigraph's raw ``bulk_load``.

For FB15k-237 and MetaQA it times the real ``kgengine load`` code path (the CLI, run
in-process) and, on the same triples pre-converted to an N-Triples file with the same IRIs
(conversion not timed), ``pyoxigraph.Store.bulk_load``. It then generates a synthetic
Wikidata5m (21M triples by default: the planted-rule KG of tests/synthetic_kg.py, with alias files)
and streams it through the ``wikidata5m`` loader. Every measured job runs in its own
subprocess, so that its peak RSS is its own.

    .venv/bin/python bench/load.py                       # full run (several minutes)
    .venv/bin/python bench/load.py --synthetic-triples 2000000 --repeats 1

Prints a table and writes ``bench/results/load.json``. Data come from
``$KGENGINE_SHARED/datasets`` (default ``../shared/datasets``)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
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
from synthetic_kg import planted_kg, write_wikidata5m  # noqa: E402

REAL = {"fb15k-237": DATASETS / "fb15k-237", "metaqa": DATASETS / "metaqa"}


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _cpu_seconds() -> float:
    """User + system time of this process, all threads (Rust's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _measure(started: float, cpu_started: float, triples: int) -> dict[str, Any]:
    return {"seconds": time.perf_counter() - started, "cpu_seconds": _cpu_seconds() - cpu_started,
            "triples": triples, "peak_rss_mib": _peak_rss_mib()}


# ---- jobs (each runs in a fresh subprocess: `load.py --job ...`) ------------------------------
def job_kgengine(dataset: str, path: str, store: str) -> dict[str, Any]:
    import kgengine.commands.kg  # noqa: F401  (import time is not load time)
    from kgengine.cli import main
    from kgengine.oxigraph.store import OxigraphStore

    started, cpu_started = time.perf_counter(), _cpu_seconds()
    main(["load", dataset, "--path", path, "--store", store], standalone_mode=False)
    with OxigraphStore(store) as opened:
        info = opened.graph_info(dataset)
    assert info is not None and info.status == "complete"
    return _measure(started, cpu_started, info.triples)


def job_raw(rdf_file: str, store: str) -> dict[str, Any]:
    import pyoxigraph as ox
    from kgengine import terms

    db = ox.Store(store)
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    if rdf_file.endswith(".nq"):
        db.bulk_load(path=rdf_file, format=ox.RdfFormat.N_QUADS, lenient=True)
    else:
        db.bulk_load(path=rdf_file, format=ox.RdfFormat.N_TRIPLES, lenient=True,
                     to_graph=ox.NamedNode(terms.graph_iri("raw")))
    db.flush()
    return _measure(started, cpu_started, len(db))


def run_job(args: list[str], workdir: Path) -> dict[str, Any]:
    store = Path(tempfile.mkdtemp(prefix="store-", dir=workdir))
    shutil.rmtree(store)
    try:
        done = subprocess.run([sys.executable, __file__, "--job", *args, str(store)],
                              capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"job {args} failed:\n{done.stdout}\n{done.stderr}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(store, ignore_errors=True)


# ---- inputs -------------------------------------------------------------------------------------
def to_ntriples(dataset: str, path: Path, out: Path) -> int:
    """The dataset's triples as N-Triples with the IRIs kgengine gives them (not timed)."""
    from kgengine import terms
    from kgengine.loaders import read_dataset

    count = 0
    with out.open("w", encoding="utf-8") as fh:
        for h, r, t in read_dataset(dataset, path).triples:
            fh.write(f"<{terms.entity_iri(h)}> <{terms.relation_iri(r)}> <{terms.entity_iri(t)}> .\n")
            count += 1
    return count


def to_nquads(dataset: str, path: Path, out: Path) -> None:
    """Exactly the N-Quads ``kgengine load`` streams into the store: facts, private ids and
    labels (not timed), for the second baseline."""
    from kgengine.loaders import read_dataset
    from kgengine.oxigraph.nquads import QuadWriter
    from kgengine.progress import NO_PROGRESS

    data = read_dataset(dataset, path)
    with out.open("wb") as fh:
        writer = QuadWriter(fh, dataset)
        writer.add_triples(data.triples, NO_PROGRESS)
        writer.add_entities(data.labels, seed=0)


def synthetic_wikidata5m(directory: Path, triples: int, seed: int = 0) -> dict[str, int]:
    """Wikidata5m-format files of the planted-rule synthetic KG (tests/synthetic_kg.py, the
    one generator the mining benchmarks use too)."""
    kg = planted_kg(triples, seed)
    write_wikidata5m(kg, directory)
    return {"triples": kg.triples, "entities": kg.entities, "relations": len(kg.facts)}


# ---- report -------------------------------------------------------------------------------------
def summarise(runs: list[dict[str, Any]], triples: int | None = None) -> dict[str, Any]:
    """Median over runs; ``triples`` (KG triples) when the job counted something else."""
    seconds = [r["seconds"] for r in runs]
    triples = triples if triples is not None else runs[0]["triples"]
    return {
        "triples": triples,
        "seconds_median": statistics.median(seconds),
        "seconds_best": min(seconds),
        "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in runs),
        "triples_per_s": triples / min(seconds),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
        "runs": runs,
    }


def print_table(results: dict[str, Any]) -> None:
    header = (f"{'job':<44}{'triples':>12}{'best s':>9}{'median s':>10}{'CPU s':>8}"
              f"{'triples/s':>11}{'peak RSS MiB':>14}")
    print(header)
    print("-" * len(header))
    for name, r in results["jobs"].items():
        print(f"{name:<44}{r['triples']:>12,}{r['seconds_best']:>9.2f}{r['seconds_median']:>10.2f}"
              f"{r['cpu_seconds_median']:>8.2f}{r['triples_per_s']:>11,.0f}{r['peak_rss_mib']:>14,.0f}")
    print("throughput ratio kgengine load / raw bulk_load (target >= 0.7): best time | median | CPU time")
    for name, ratio in results["ratios"].items():
        print(f"  {name:<36}{ratio['best']:>6.2f} |{ratio['median']:>6.2f} |{ratio['cpu']:>6.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--synthetic-triples", type=int, default=21_000_000)
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--repeats", type=int, default=5, help="runs per real-data job")
    parser.add_argument("--workdir", type=Path, default=None, help="temp space [default: system temp]")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "load.json")
    parser.add_argument("--job", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        kind, *rest = args.job
        result = job_kgengine(*rest) if kind == "kgengine" else job_raw(*rest)
        print(json.dumps(result))
        return 0

    workdir = Path(tempfile.mkdtemp(prefix="kgengine-bench-", dir=args.workdir))
    results: dict[str, Any] = {"jobs": {}, "ratios": {}}
    try:
        for dataset, path in REAL.items():
            nt_file, nq_file = workdir / f"{dataset}.nt", workdir / f"{dataset}.nq"
            to_ntriples(dataset, path, nt_file)
            to_nquads(dataset, path, nq_file)
            ours, raw, raw_same = [], [], []
            for _ in range(args.repeats):  # interleaved, so that load changes on the machine hit all
                ours.append(run_job(["kgengine", dataset, str(path)], workdir))
                raw.append(run_job(["raw", str(nt_file)], workdir))
                raw_same.append(run_job(["raw", str(nq_file)], workdir))
            jobs = results["jobs"]
            jobs[f"kgengine load {dataset}"] = summarise(ours)
            jobs[f"raw bulk_load {dataset} (facts)"] = summarise(raw)
            jobs[f"raw bulk_load {dataset} (same quads)"] = {
                **summarise(raw_same, jobs[f"kgengine load {dataset}"]["triples"]),
                "quads": raw_same[0]["triples"],
            }
            ours_job = jobs[f"kgengine load {dataset}"]
            for baseline in ("facts", "same quads"):
                raw_job = jobs[f"raw bulk_load {dataset} ({baseline})"]
                results["ratios"][f"{dataset} vs raw {baseline}"] = {
                    key: raw_job[field] / ours_job[field]
                    for key, field in (("best", "seconds_best"), ("median", "seconds_median"),
                                       ("cpu", "cpu_seconds_median"))
                }
            nt_file.unlink()
            nq_file.unlink()
        if not args.skip_synthetic:
            synthetic = workdir / "wikidata5m"
            started = time.perf_counter()
            shape = synthetic_wikidata5m(synthetic, args.synthetic_triples)
            results["synthetic"] = {**shape, "generate_seconds": time.perf_counter() - started}
            run = run_job(["kgengine", "wikidata5m", str(synthetic)], workdir)
            results["jobs"][f"kgengine load wikidata5m synthetic {args.synthetic_triples:,}"] = {
                **summarise([run]), "input_lines": args.synthetic_triples,
                "lines_per_s": args.synthetic_triples / run["seconds"],
                "load_average_after": os.getloadavg(),
            }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["machine"] = {
        "python": platform.python_version(), "platform": platform.platform(),
        "cpus": os.cpu_count(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "pyoxigraph": __import__("pyoxigraph").__version__,
        "load_average_at_end": os.getloadavg(),  # other work on the machine skews wall times
    }
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
