"""Benchmark: `kgengine serve` against Oxigraph's own Rust server on FB15k-237.

    .venv/bin/python bench/serve.py [--data DIR] [--duration S] [--clients N]

Loads FB15k-237 into a fresh store, copies it, and serves one copy with `kgengine serve`
and the other with `oxigraph serve-read-only --union-default-graph` (same default-graph
semantics). For each query of the fixed mix (1-hop lookup, 2-hop join, aggregate) and for
the weighted mix, N keep-alive clients (threads spread over several client processes) send
queries for S seconds to one server, then to the other, for R alternating rounds; the table
gives the median over rounds of throughput and p50/p99 latency per server, the CPU seconds
each server (all its processes) spent per request, and the kgengine/oxigraph ratios of
throughput and of requests per CPU-second (the latter is what a shared, noisy machine
distorts least). Results are checked to agree between the servers first. Writes
bench/results/serve.json."""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psutil
from kgengine import terms
from kgengine.loaders import read_dataset
from kgengine.oxigraph.store import OxigraphStore

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the one shared-data lookup (tests/shared_data.py)
from shared_data import DATASETS  # noqa: E402

BIN = Path(sys.executable).parent
JSON_TYPE = "application/sparql-results+json"

QUERIES = {
    "lookup": "SELECT ?r ?t WHERE {{ <{e}> ?r ?t }}",
    "two_hop": "SELECT ?r1 ?m ?r2 ?t WHERE {{ <{e}> ?r1 ?m . ?m ?r2 ?t }} LIMIT 1000",
    "aggregate": "SELECT ?r (COUNT(*) AS ?n) WHERE {{ ?h ?r ?t }} GROUP BY ?r ORDER BY DESC(?n) LIMIT 10",
}
MIX = {"lookup": 0.8, "two_hop": 0.15, "aggregate": 0.05}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, path: str, proc: subprocess.Popen[bytes], limit: float = 120.0) -> None:
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path + "?" + urlencode({"query": "ASK {}"}), headers={"Accept": JSON_TYPE})
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server on port {port} did not come up")


def build_store(data: Path, target: Path) -> tuple[int, float]:
    started = time.perf_counter()
    dataset = read_dataset("fb15k-237", data)
    store = OxigraphStore(str(target))
    try:
        info = store.load("fb15k-237", dataset.triples, dataset=dataset.name, labels=dataset.labels,
                          splits=dataset.splits)
    finally:
        store.close()
    return info.triples, time.perf_counter() - started


def sample_entities(data: Path, count: int, seed: int) -> list[str]:
    heads = sorted({line.split("\t")[0] for line in (data / "train.txt").read_text().splitlines() if line})
    return random.Random(seed).sample(heads, count)


def query_text(kind: str, entity: str) -> str:
    return QUERIES[kind].format(e=terms.entity_iri(entity))


# ---- load generation (runs in client processes) ----------------------------------------
def _client_process(port: int, path: str, plan: list[str], threads: int, duration: float,
                    warmup: float, seed: int, out: Any) -> None:
    import threading

    results: list[tuple[float, int]] = []
    sent = [0]
    lock = threading.Lock()
    stop_at = time.perf_counter() + warmup + duration
    measure_from = time.perf_counter() + warmup

    def run(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        local: list[tuple[float, int]] = []
        count = 0
        while True:
            url = path + "?" + urlencode({"query": rng.choice(plan)})
            t0 = time.perf_counter()
            if t0 >= stop_at:
                break
            try:
                conn.request("GET", url, headers={"Accept": JSON_TYPE})
                response = conn.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            count += 1
            if t0 >= measure_from:
                local.append((time.perf_counter() - t0, status))
        with lock:
            results.extend(local)
            sent[0] += count

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((results, sent[0]))


def tree_cpu(pid: int) -> dict[int, float]:
    """CPU seconds used so far by a server process and each of its children, by pid."""
    out = {}
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
        except psutil.Error:
            pass
    return out


def drive(port: int, path: str, plan: list[str], clients: int, procs: int, duration: float,
          warmup: float, seed: int, cpu: Callable[[], dict[int, float]]) -> dict[str, Any]:
    queue: mp.Queue[tuple[list[tuple[float, int]], int]] = mp.Queue()
    per_proc = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    processes = [
        mp.Process(target=_client_process, args=(port, path, plan, n, duration, warmup, seed + i, queue))
        for i, n in enumerate(per_proc) if n
    ]
    cpu_before = cpu()
    for p in processes:
        p.start()
    samples: list[tuple[float, int]] = []
    sent = 0
    for _ in processes:
        got, count = queue.get()
        samples.extend(got)
        sent += count
    cpu_after = cpu()
    # a process that ended during the run took its CPU time with it: then there is no figure
    same = set(cpu_after) == set(cpu_before)
    cpu_used = sum(cpu_after.values()) - sum(cpu_before.values()) if same else float("nan")
    for p in processes:
        p.join()
    ok = sorted(latency for latency, status in samples if status == 200)
    errors = sum(1 for _, status in samples if status != 200)

    def pct(q: float) -> float:
        return ok[min(len(ok) - 1, int(q * len(ok)))] * 1000 if ok else float("nan")

    return {"requests": len(samples), "errors": errors, "throughput_rps": len(ok) / duration,
            "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "mean_ms": statistics.fmean(ok) * 1000 if ok else float("nan"),
            "cpu_us_per_request": cpu_used / sent * 1e6 if sent else float("nan")}


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per metric, the median over rounds (errors are summed)."""
    def median(key: str) -> float:
        values = [r[key] for r in runs if r[key] == r[key]]  # NaN (no figure) left out
        return statistics.median(values) if values else float("nan")

    out = {key: median(key) for key in runs[0] if key != "errors"}
    out["errors"] = sum(r["errors"] for r in runs)
    out["rounds"] = len(runs)
    return out


def fetch(port: int, path: str, query: str) -> list[dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", path + "?" + urlencode({"query": query}), headers={"Accept": JSON_TYPE})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"{response.status}: {body[:200]!r}")
    return json.loads(body)["results"]["bindings"]


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATASETS / "fb15k-237")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per phase")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per phase")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=8, help="concurrent keep-alive clients")
    parser.add_argument("--client-procs", type=int, default=max(1, min(4, (os.cpu_count() or 2) // 2)))
    parser.add_argument("--workers", type=int, default=None, help="kgengine serve --workers")
    parser.add_argument("--http-processes", type=int, default=1, help="kgengine serve --http-processes")
    parser.add_argument("--entities", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "serve.json")
    args = parser.parse_args()

    load_before = os.getloadavg()  # the machine may be shared: say how busy it was
    work = Path(tempfile.mkdtemp(prefix="kgengine-bench-serve-"))
    servers: list[subprocess.Popen[bytes]] = []
    try:
        triples, load_s = build_store(args.data, work / "kgengine")
        shutil.copytree(work / "kgengine", work / "oxigraph")
        print(f"loaded {triples:,} triples in {load_s:.1f} s; store copied for the Oxigraph server")
        kg_port, ox_port = free_port(), free_port()
        kg_cmd = [str(BIN / "kgengine"), "serve", "--store", str(work / "kgengine"), "--port", str(kg_port),
                  "--timeout", "120", "--max-rows", "1000000"]
        if args.workers:
            kg_cmd += ["--workers", str(args.workers)]
        kg_cmd += ["--http-processes", str(args.http_processes)]
        ox_cmd = [str(BIN / "oxigraph"), "serve-read-only", "--location", str(work / "oxigraph"),
                  "--bind", f"127.0.0.1:{ox_port}", "--union-default-graph"]
        logs = {name: work / f"{name}.log" for name in ("kgengine", "oxigraph")}
        for cmd, log_path in zip((kg_cmd, ox_cmd), logs.values(), strict=True):
            with log_path.open("wb") as log_file:
                servers.append(subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT))
        targets = {"kgengine": (kg_port, "/sparql"), "oxigraph": (ox_port, "/query")}
        for (port, path), proc in zip(targets.values(), servers, strict=True):
            wait_ready(port, path, proc)

        entities = sample_entities(args.data, args.entities, args.seed)
        plans = {kind: [query_text(kind, e) for e in entities] for kind in QUERIES}
        # the same answers from both servers before timing anything
        for kind, plan in plans.items():
            for query in plan[:5]:
                a, b = (canonical(fetch(port, path, query)) for port, path in targets.values())
                if kind != "two_hop" and a != b:  # LIMIT without ORDER BY may pick other rows
                    raise SystemExit(f"servers disagree on {kind}: {query}")
                if kind == "two_hop" and len(a) != len(b):
                    raise SystemExit(f"servers disagree on the row count of {query}")
        rng = random.Random(args.seed)
        mix = [query_text(rng.choices(list(MIX), weights=list(MIX.values()))[0], rng.choice(entities))
               for _ in range(1000)]
        phases = {**plans, "mix": mix}

        pids = dict(zip(targets, (proc.pid for proc in servers), strict=True))
        results: dict[str, dict[str, Any]] = {}
        for phase, plan in phases.items():
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
            for _ in range(args.rounds):
                for name, (port, path) in targets.items():
                    runs[name].append(drive(port, path, plan, args.clients, args.client_procs, args.duration,
                                            args.warmup, args.seed, partial(tree_cpu, pids[name])))
            results[phase] = {name: median_run(r) for name, r in runs.items()}
            for name, log_path in logs.items():
                if results[phase][name]["errors"]:
                    print(f"{name} had errors; the end of its log:\n" + log_path.read_text()[-3000:])
            kg, ox_ = results[phase]["kgengine"], results[phase]["oxigraph"]
            results[phase]["ratio"] = kg["throughput_rps"] / ox_["throughput_rps"]
            results[phase]["cpu_ratio"] = ox_["cpu_us_per_request"] / kg["cpu_us_per_request"]
            print(f"  {phase}: kgengine {kg['throughput_rps']:.0f} req/s, oxigraph "
                  f"{ox_['throughput_rps']:.0f} req/s", flush=True)
    finally:
        for proc in servers:
            proc.terminate()
        for proc in servers:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    header = (f"| {'query':<9} | {'server':<8} | {'req/s':>7} | {'p50 ms':>8} | {'p99 ms':>8} | "
              f"{'CPU us/req':>10} | {'errors':>6} | {'ratio req/s':>11} | {'ratio req/CPU-s':>15} |")
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    for phase, by_server in results.items():
        for name in ("kgengine", "oxigraph"):
            r = by_server[name]
            mine = name == "kgengine"
            ratio = f"{by_server['ratio']:.2f}" if mine else ""
            cpu_ratio = f"{by_server['cpu_ratio']:.2f}" if mine else ""
            print(f"| {phase:<9} | {name:<8} | {r['throughput_rps']:>7.0f} | {r['p50_ms']:>8.2f} | "
                  f"{r['p99_ms']:>8.2f} | {r['cpu_us_per_request']:>10.0f} | {r['errors']:>6} | "
                  f"{ratio:>11} | {cpu_ratio:>15} |")
    lookup_ratio = results["lookup"]["ratio"]
    print(f"lookup throughput ratio kgengine/oxigraph = {lookup_ratio:.2f} (target >= 0.5); "
          f"per CPU-second {results['lookup']['cpu_ratio']:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "dataset": "fb15k-237", "triples": triples, "queries": QUERIES, "mix_weights": MIX,
        "clients": args.clients, "client_processes": args.client_procs, "duration_s": args.duration,
        "rounds": args.rounds, "kgengine_workers": args.workers, "http_processes": args.http_processes,
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "results": results, "lookup_ratio": lookup_ratio,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
