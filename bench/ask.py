"""KG-RAG speed on MetaQA (a benchmark, not a test): candidate retrieval, embedding
selection, the triple-embedding cache build, and the offline answerer end to end.

1. MetaQA (kb_reconstructed.txt) loaded into a fresh Oxigraph store (a temporary directory)
   and, unless ``--no-neo4j``, into Neo4j (``--neo4j URI``, credentials from NEO4J_USER /
   NEO4J_PASSWORD, else the embedded Neo4j Community of the test suite, as bench/neo4j.py).
2. N-hop candidate retrieval (``KHopRetriever``, direction both, ``--hub-cap``) for N = 1, 2,
   3 from the topic entities of ``--questions`` seeded MetaQA test questions of N hops:
   latency p50 / p95 per backend, candidate counts, and whether both backends return the
   same triples; with ``--uncapped``, Oxigraph without the hub cap too, for comparison.
3. Time to build the MetaQA triple-embedding cache (all-MiniLM-L6-v2 on the CPU, dataset
   ids) into a fresh cache directory, and to load it again.
4. Selection with the warm cache: top-K (K = 10, 20, 30) of each question's candidates
   (question text without brackets); p50 / p95 (includes encoding the question). Selection
   reads vectors from the on-disk cache, the same on every backend: measured once.
5. ``offline_answerer_latency``: the offline answerer (kgengine.rag.methods, learned from
   MetaQA dev) end to end on the same questions, per backend, when that module exists.

Peak memory is this process's maximum resident set after each phase (the embedding model is
loaded first, so every figure includes torch and the model; Neo4j's JVM is a separate
process). Prints Markdown tables and writes bench/results/ask.json.

    .venv/bin/python bench/ask.py [--questions 500] [--hub-cap 100] [--no-neo4j] [--uncapped]
"""

# ruff: noqa: E402 (sys.path must be fixed before the imports below)
from __future__ import annotations

import sys
from pathlib import Path

# this file's folder heads sys.path when run as a script: keep bench/neo4j.py from
# shadowing the `neo4j` driver package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import json
import os
import platform
import random
import resource
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from kgengine.loaders import read_dataset
from kgengine.loaders.metaqa import MetaQAQuestion, load_questions
from kgengine.model import Direction, Question, Triple
from kgengine.neo4j_store import Neo4jStore
from kgengine.oxigraph.store import OxigraphStore
from kgengine.progress import progress_bar
from kgengine.rag.embeddings import DEFAULT_THREADS, load_encoder
from kgengine.rag.retrieval import DEFAULT_HUB_CAP, KHopRetriever
from kgengine.rag.selection import TOP_K_CHOICES, EmbeddingSelector

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the shared-data lookup and the Neo4j launcher
from neo4j_server import bench_server as neo4j_server
from shared_data import DATASETS

METAQA = DATASETS / "metaqa"
RESULTS = ROOT / "bench" / "results" / "ask.json"
GRAPH = "bench-ask-metaqa"
HOPS = (1, 2, 3)
WARM_UP = 20  # untimed calls first (plan caches, JIT, page cache)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(latencies_ms: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(latencies_ms, 0.5), 2), "p95": round(percentile(latencies_ms, 0.95), 2),
            "max": round(max(latencies_ms), 2)}


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = call()
    return result, (time.perf_counter() - started) * 1000


def sample_questions(entities: set[str], count: int, seed: int) -> dict[int, list[MetaQAQuestion]]:
    """``count`` seeded test questions per hop count whose topic entity is in the graph."""
    out = {}
    for hops in HOPS:
        pool = [q for q in load_questions(METAQA, "test", hops=[hops]) if q.topic in entities]
        out[hops] = random.Random(seed + hops).sample(pool, min(count, len(pool)))
    return out


def topic_of(question: MetaQAQuestion) -> str:
    """The topic entity of a sampled question (sample_questions keeps only those in the graph)."""
    if question.topic is None:
        raise ValueError(f"a MetaQA question without a topic entity: {question.text!r}")
    return question.topic


def coverage(questions: list[MetaQAQuestion], candidates: list[list[Triple]]) -> float:
    """Mean share of a question's gold answers found among its candidates' entities (what
    the cap may cost; a measurement of retrieval, never seen by an answerer)."""
    shares = []
    for q, found in zip(questions, candidates, strict=True):
        entities = {e for t in found for e in (t.head, t.tail)}
        shares.append(sum(a in entities for a in q.answers) / len(q.answers))
    return round(sum(shares) / len(shares), 4)


def retrieval(store: Any, questions: dict[int, list[MetaQAQuestion]], hub_cap: int | None
              ) -> tuple[dict[str, Any], dict[int, list[list[Triple]]]]:
    stats: dict[str, Any] = {}
    found: dict[int, list[list[Triple]]] = {}
    for hops, chosen in questions.items():
        retriever = KHopRetriever(store, GRAPH, hops=hops, direction=Direction.BOTH, hub_cap=hub_cap)
        for q in chosen[:WARM_UP]:
            retriever.search(Question(q.text, q.topic), topic_of(q))
        latencies, found[hops] = [], []
        for q in chosen:
            triples, ms = timed(partial(retriever.search, Question(q.text, q.topic), topic_of(q)))
            latencies.append(ms)
            found[hops].append(triples)
        sizes = sorted(len(t) for t in found[hops])
        stats[str(hops)] = {"ms": summary(latencies), "triples_median": sizes[len(sizes) // 2],
                            "triples_max": sizes[-1], "answer_coverage": coverage(chosen, found[hops])}
        print(f"  {hops}-hop retrieval: {stats[str(hops)]}", flush=True)
    return stats, found


def selection(selector: EmbeddingSelector, questions: dict[int, list[MetaQAQuestion]],
              candidates: dict[int, list[list[Triple]]]) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for hops, chosen in questions.items():
        pairs = [(Question(q.plain_text), c) for q, c in zip(chosen, candidates[hops], strict=True) if c]
        for text, found in pairs[:WARM_UP]:
            selector.select(text, found, 10)
        row: dict[str, Any] = {}
        for k in TOP_K_CHOICES:
            row[str(k)] = summary([timed(partial(selector.select, text, found, k))[1]
                                   for text, found in pairs])
        stats[str(hops)] = row
        print(f"  {hops}-hop selection: {row}", flush=True)
    stats["encoded_on_the_fly"] = selector.encoded_on_the_fly  # 0: every candidate was cached
    return stats


def offline_answerer_latency(store: Any, questions: dict[int, list[MetaQAQuestion]]) -> dict[str, Any]:
    """The offline answerer end to end (kgengine.rag.methods.build_answerer, learned from
    MetaQA dev): p50 / p95 per hop count over the same questions; the answerer sees the
    question text and topic entity only."""
    from kgengine.rag.methods import AnswerSettings, build_answerer

    train = tuple(METAQA / f"{hops}-hop" / "qa_dev.txt" for hops in HOPS)
    try:
        answerer, build_ms = timed(lambda: build_answerer(store, GRAPH, "offline",
                                                                    AnswerSettings(train_paths=train)))
    except Exception as exc:  # another helper's code: report, do not lose the other figures
        return {"skipped": f"build_answerer failed: {type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"build_s": round(build_ms / 1000, 1)}
    for hops, chosen in questions.items():
        for q in chosen[:WARM_UP]:
            answerer.answer(Question(q.text, q.topic))
        latencies, hits = [], 0
        for q in chosen:
            answer, ms = timed(partial(answerer.answer, Question(q.text, q.topic)))
            latencies.append(ms)
            hits += bool(answer.answers) and answer.answers[0].id in q.answers
        out[str(hops)] = {"ms": summary(latencies), "hit_at_1": round(hits / len(chosen), 4)}
        print(f"  {hops}-hop offline answerer: {out[str(hops)]}", flush=True)
    return out


def load_metaqa(store: Any) -> dict[str, Any]:
    data = read_dataset("metaqa", METAQA)
    info, ms = timed(lambda: store.load(GRAPH, data.triples, dataset="metaqa", labels=data.labels,
                                        source=data.source, replace=True))
    return {"triples": info.triples, "seconds": round(ms / 1000, 2)}


def table(results: dict[str, Any]) -> str:
    backends = list(results["retrieval"])
    header = ["hops", "candidates (median / max)", "gold answers in candidates",
              *(f"{b} retrieval" for b in backends), "same triples",
              *(f"selection K={k}" for k in TOP_K_CHOICES),
              *(f"{b} offline answerer" for b in results["offline"])]
    lines = [f"MetaQA ({results['triples']:,} triples), {results['questions']} seeded test questions per "
             f"hop count, hub cap {results['hub_cap']}, direction both; {results['machine']}, load average "
             f"{results['load_average_at_start']} at start. Latency in ms (p50 / p95).", "",
             "| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for hops in map(str, HOPS):
        first = results["retrieval"][backends[0]][hops]
        cells = [hops, f"{first['triples_median']:,} / {first['triples_max']:,}",
                 first.get("answer_coverage", "-")]
        timings = [results["retrieval"][b][hops]["ms"] for b in backends]
        cells += [f"{ms['p50']} / {ms['p95']}" for ms in timings]
        cells.append(results["same_triples"].get(hops, "-"))
        cells += [f"{results['selection'][hops][str(k)]['p50']} / {results['selection'][hops][str(k)]['p95']}"
                  for k in TOP_K_CHOICES]
        for row in results["offline"].values():
            cells.append(f"{row[hops]['ms']['p50']} / {row[hops]['ms']['p95']}" if hops in row else "skipped")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    if "oxigraph-uncapped" in results:
        uncapped = results["oxigraph-uncapped"].items()
        lines += ["", "Oxigraph without the hub cap (same topics): "
                  + "; ".join(f"{h}-hop {r['ms']['p50']} / {r['ms']['p95']} ms, {r['triples_median']:,} / "
                              f"{r['triples_max']:,} triples, gold answers in candidates "
                              f"{r.get('answer_coverage', '-')}" for h, r in uncapped)]
    cache = results["embedding_cache"]
    lines += ["", f"Triple-embedding cache ({cache['model']}, {results['encoder_threads']} torch thread(s), "
              f"{cache['triples']:,} triples, "
              f"{cache['dimension']} dims, {cache['mib']} MiB on disk): built in {cache['build_s']} s "
              f"({cache['triples_per_s']:,} triples/s), loaded again in {cache['load_ms']} ms.",
              "Peak resident memory (MiB) after: "
              + ", ".join(f"{k} {v}" for k, v in results["peak_rss_mib"].items()) + "."]
    for backend, row in results["offline"].items():
        if "skipped" in row:
            lines.append(f"Offline answerer ({backend}): skipped: {row['skipped']}")
        else:
            lines.append(f"Offline answerer ({backend}): built (learning from dev) in {row['build_s']} s; "
                         "Hit@1 on these questions: "
                         + ", ".join(f"{h}-hop {row[h]['hit_at_1']}" for h in map(str, HOPS)) + ".")
    return "\n".join(lines)


def save(results: dict[str, Any]) -> None:
    """Written after every phase: a failure late in the run keeps the figures so far."""
    results["peak_rss_mib"].pop("end", None)  # (re)inserted last
    results["peak_rss_mib"]["end"] = peak_rss_mib()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=500, help="seeded test questions per hop count")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hub-cap", type=int, default=DEFAULT_HUB_CAP)
    parser.add_argument("--neo4j", default=os.environ.get("NEO4J_URI"), help="Neo4j URI [embedded server]")
    parser.add_argument("--no-neo4j", action="store_true", help="Oxigraph only")
    parser.add_argument("--uncapped", action="store_true",
                        help="also time Oxigraph retrieval without the cap")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                        help="torch CPU threads for the embedding model (0: torch's default)")
    parser.add_argument("--no-offline", action="store_true", help="skip the offline answerer section")
    args = parser.parse_args()

    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "python": platform.python_version(),
        "load_average_at_start": round(os.getloadavg()[0], 1), "hub_cap": args.hub_cap,
        "retrieval": {}, "same_triples": {}, "offline": {}, "peak_rss_mib": {},
        "encoder_threads": args.threads or "torch default",
    }
    encoder = load_encoder(threads=args.threads or None)
    with tempfile.TemporaryDirectory(prefix="kgengine-bench-ask-") as tmp:
        oxigraph = OxigraphStore(str(Path(tmp) / "store"))
        results["load"] = {"oxigraph": load_metaqa(oxigraph)}
        results["triples"] = results["load"]["oxigraph"]["triples"]
        entities = {row["e"] for row in oxigraph.run("entities", GRAPH)}
        questions = sample_questions(entities, args.questions, args.seed)
        results["questions"] = min(len(q) for q in questions.values())
        print("Oxigraph:", flush=True)
        results["retrieval"]["oxigraph"], candidates = retrieval(oxigraph, questions, args.hub_cap)
        results["peak_rss_mib"]["retrieval"] = peak_rss_mib()
        save(results)
        if args.uncapped:
            print("Oxigraph, no hub cap:", flush=True)
            results["oxigraph-uncapped"], _ = retrieval(oxigraph, questions, None)

        cache_dir = Path(tmp) / "embeddings"
        with progress_bar("embedding MetaQA") as progress:
            selector, build_ms = timed(lambda: EmbeddingSelector(oxigraph, GRAPH, encoder=encoder,
                                                                 cache_dir=cache_dir, progress=progress))
        assert selector.cache is not None
        results["peak_rss_mib"]["cache build"] = peak_rss_mib()
        save(results)
        warm, load_ms = timed(lambda: EmbeddingSelector(oxigraph, GRAPH, encoder=encoder,
                                                        cache_dir=cache_dir))
        cached = warm.cache
        assert cached is not None
        size = sum(p.stat().st_size for p in cached.path.iterdir())
        results["embedding_cache"] = {
            "model": warm.encoder.model_id, "triples": len(cached.triples),
            "dimension": int(cached.vectors.shape[1]), "mib": round(size / 2**20, 1),
            "build_s": round(build_ms / 1000, 1),
            "triples_per_s": round(len(cached.triples) / (build_ms / 1000)), "load_ms": round(load_ms),
        }
        print(f"embedding cache: {results['embedding_cache']}", flush=True)
        results["selection"] = selection(warm, questions, candidates)
        results["peak_rss_mib"]["selection"] = peak_rss_mib()
        save(results)
        if not args.no_offline:
            results["offline"]["oxigraph"] = offline_answerer_latency(oxigraph, questions)
            results["peak_rss_mib"]["offline answerer"] = peak_rss_mib()
            save(results)

        if not args.no_neo4j:
            with neo4j_server(args.neo4j) as (uri, auth, server):
                results["neo4j"] = server
                with Neo4jStore(uri, auth=auth) as neo4j:
                    results["load"]["neo4j"] = load_metaqa(neo4j)
                    print("Neo4j:", flush=True)
                    results["retrieval"]["neo4j"], neo_found = retrieval(neo4j, questions, args.hub_cap)
                    for hops in HOPS:
                        same = sum(a == b for a, b in zip(candidates[hops], neo_found[hops], strict=True))
                        results["same_triples"][str(hops)] = f"{same}/{len(candidates[hops])}"
                    save(results)
                    if not args.no_offline:
                        results["offline"]["neo4j"] = offline_answerer_latency(neo4j, questions)
                    neo4j.drop(GRAPH)
        oxigraph.close()
    save(results)
    print(table(results))
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
