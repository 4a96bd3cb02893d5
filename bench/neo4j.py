"""Neo4j vs Oxigraph on the same machine, in the same run (a benchmark, not a test).

1. Load throughput: FB15k-237 (all splits) and MetaQA (kb_reconstructed.txt) loaded into a
   fresh Oxigraph directory and into Neo4j; triples/s each and the ratio.
2. k-hop retrieval (``store.neighbourhood``, direction both, 1/2/3 hops) from 200 seeded
   MetaQA topic entities (test questions): latency p50 / p95 on each backend, and a check
   that both return the same triples.
3. With ``--batch-sizes``, the Neo4j load of FB15k-237 train at each UNWIND batch size
   (how ``kgengine.neo4j_store.BATCH_SIZE`` was chosen).

Neo4j: ``--neo4j URI`` (credentials from NEO4J_USER / NEO4J_PASSWORD), else the embedded
Neo4j Community that the test suite uses (tests/neo4j_server.py). Prints a Markdown table
and writes bench/results/neo4j.json.

    .venv/bin/python bench/neo4j.py [--neo4j bolt://host:7687] [--topics 200]
                                    [--batch-sizes 1000,5000,10000,20000]
"""

# ruff: noqa: E402 (sys.path must be fixed before the imports below)
from __future__ import annotations

import sys
from pathlib import Path

# Run as `python bench/neo4j.py`, this file's folder heads sys.path, and the file's name
# (fixed by the issue) would shadow the `neo4j` driver package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from typing import Any

from kgengine.loaders import read_dataset
from kgengine.loaders.metaqa import load_questions
from kgengine.model import Direction
from kgengine.neo4j_store import BATCH_SIZE, Neo4jStore
from kgengine.oxigraph.store import OxigraphStore
from kgengine.store import KGStore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the one shared-data lookup (tests/shared_data.py)
from neo4j_server import bench_server as neo4j_server  # noqa: E402
from shared_data import DATASETS as SHARED  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "neo4j.json"
GRAPH_PREFIX = "bench-"


def timed_load(store: KGStore, graph: str, dataset: str, path: Path) -> dict[str, Any]:
    data = read_dataset(dataset, path)
    started = time.perf_counter()
    info = store.load(graph, data.triples, dataset=dataset, labels=data.labels, replace=True)
    return rate(info.triples, time.perf_counter() - started)


def rate(triples: int, seconds: float) -> dict[str, Any]:
    return {"triples": triples, "seconds": round(seconds, 2), "per_second": round(triples / seconds)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def khop(stores: dict[str, tuple[KGStore, str]], topics: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    warm = topics[:20]  # plan caches and JIT warmed alike on both sides, not timed
    for store, graph in stores.values():
        for topic in warm:
            store.neighbourhood(graph, topic, 2, Direction.BOTH)
    for hops in (1, 2, 3):
        latencies: dict[str, list[float]] = {name: [] for name in stores}
        sizes: list[int] = []
        mismatches = 0
        for topic in topics:
            found = {}
            for name, (store, graph) in stores.items():
                started = time.perf_counter()
                triples = store.neighbourhood(graph, topic, hops, Direction.BOTH)
                latencies[name].append((time.perf_counter() - started) * 1000)
                found[name] = set(triples)
            sizes.append(len(found["oxigraph"]))
            mismatches += found["oxigraph"] != found["neo4j"]
        out[str(hops)] = {
            "triples_median": statistics.median(sizes),
            "triples_max": max(sizes),
            "mismatches": mismatches,
            **{f"{name}_ms": {"p50": round(percentile(v, 0.5), 2), "p95": round(percentile(v, 0.95), 2)}
               for name, v in latencies.items()},
        }
    return out


def batch_sweep(uri: str, auth: tuple[str, str] | None, sizes: list[int], rounds: int = 2) -> dict[str, Any]:
    """FB15k-237 train loaded at each batch size, best of ``rounds`` (other work on the
    machine only ever slows a run down), after one untimed load: the first load into a
    fresh server also pays a plan compilation per relation type and the JVM's warm-up."""
    data = read_dataset("fb15k-237", SHARED / "fb15k-237", ["train"])
    graph = GRAPH_PREFIX + "batch"
    with Neo4jStore(uri, auth=auth) as store:
        store.load(graph, data.triples, dataset="fb15k-237", replace=True)
        store.drop(graph)
    out: dict[str, Any] = {}
    for size in sizes:
        runs = []
        for _ in range(rounds):
            with Neo4jStore(uri, auth=auth, batch_size=size) as store:
                started = time.perf_counter()
                info = store.load(graph, data.triples, dataset="fb15k-237", replace=True)
                runs.append(rate(info.triples, time.perf_counter() - started))
                store.drop(graph)
        out[str(size)] = {**max(runs, key=lambda r: r["per_second"]), "runs": [r["per_second"] for r in runs]}
        print(f"batch {size:>6,}: {out[str(size)]['runs']} triples/s", flush=True)
    return out


def table(results: dict[str, Any]) -> str:
    lines = [f"{results['neo4j']}, {results['machine']}, load average {results['load_average_at_start']} "
             "at start.", "",
             "| dataset | triples | Oxigraph load (triples/s) | Neo4j load (triples/s) | Oxigraph / Neo4j |",
             "|---|---:|---:|---:|---:|"]
    for name, row in results["load"].items():
        ox, neo = row["oxigraph"], row["neo4j"]
        ratio = ox["per_second"] / neo["per_second"]
        lines.append(f"| {name} | {ox['triples']:,} | {ox['per_second']:,} ({ox['seconds']} s) | "
                     f"{neo['per_second']:,} ({neo['seconds']} s) | {ratio:.1f}x |")
    lines += ["", f"k-hop retrieval, direction both, {results['topics']} seeded MetaQA topic entities "
              "(latency in ms):", "",
              "| hops | triples (median / max) | Oxigraph p50 | Oxigraph p95 | Neo4j p50 | Neo4j p95 | "
              "same triples |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for hops, row in results["khop"].items():
        lines.append(f"| {hops} | {row['triples_median']:,.0f} / {row['triples_max']:,} | "
                     f"{row['oxigraph_ms']['p50']} | {row['oxigraph_ms']['p95']} | "
                     f"{row['neo4j_ms']['p50']} | {row['neo4j_ms']['p95']} | "
                     f"{results['topics'] - row['mismatches']}/{results['topics']} |")
    if results.get("batch_sizes"):
        lines += ["", "Neo4j load of FB15k-237 train by UNWIND batch size "
                  "(best of 2, after a warm-up load):", "",
                  "| batch size | triples/s |", "|---:|---:|"]
        lines += [f"| {int(size):,} | {row['per_second']:,} |"
                  for size, row in results["batch_sizes"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--neo4j", default=os.environ.get("NEO4J_URI"), help="Neo4j URI [embedded server]")
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-sizes", default="", help="e.g. 1000,5000,10000,20000")
    args = parser.parse_args()

    with neo4j_server(args.neo4j) as (uri, auth, server), tempfile.TemporaryDirectory() as tmp:
        results: dict[str, Any] = {
            "neo4j": server, "batch_size": BATCH_SIZE, "machine": f"{platform.machine()}, "
            f"{os.cpu_count()} cores", "python": platform.python_version(),
            # other work on the machine skews every figure: keep that context with them
            "load_average_at_start": round(os.getloadavg()[0], 1), "load": {},
        }
        oxigraph = OxigraphStore(str(Path(tmp) / "store"))
        neo4j = Neo4jStore(uri, auth=auth)
        try:
            if args.batch_sizes:
                sizes = [int(s) for s in args.batch_sizes.split(",")]
                results["batch_sizes"] = batch_sweep(uri, auth, sizes)
            for dataset, path in (("fb15k-237", SHARED / "fb15k-237"), ("metaqa", SHARED / "metaqa")):
                graph = GRAPH_PREFIX + dataset
                results["load"][dataset] = {
                    "oxigraph": timed_load(oxigraph, graph, dataset, path),
                    "neo4j": timed_load(neo4j, graph, dataset, path),
                }
                print(f"loaded {dataset}: {results['load'][dataset]}", flush=True)
            questions = load_questions(SHARED / "metaqa", "test")
            entities = {row["e"] for row in oxigraph.run("entities", GRAPH_PREFIX + "metaqa")}
            candidates = sorted({q.topic for q in questions if q.topic is not None} & entities)
            topics = random.Random(args.seed).sample(candidates, min(args.topics, len(candidates)))
            results["topics"] = len(topics)
            graph = GRAPH_PREFIX + "metaqa"
            results["khop"] = khop({"oxigraph": (oxigraph, graph), "neo4j": (neo4j, graph)}, topics)
            for dataset in results["load"]:
                neo4j.drop(GRAPH_PREFIX + dataset)
        finally:
            neo4j.close()
            oxigraph.close()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
