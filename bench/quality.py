"""Answer quality of the offline answerer (``kgengine ask --method offline``), measured:

- MetaQA 1/2/3-hop test (the reconstructed KB, ``kgengine load metaqa``), relation paths
  learned from the dev file of the same hop count: Hit@1 (kgengine.eval.metrics.hit_at_1:
  the top answer equals a gold answer, lower-cased and stripped), on the full test set or a
  seeded sample (``--sample N``);
- MetaQA held-out patterns: a seeded share (``--holdout 0.2``) of each hop's dev patterns is
  removed from learning; Hit@1 on the test questions of those patterns (answered through the
  nearest known pattern or zero-shot);
- (``--fb15k237``) the same for BRINK FB15k-237, built as the README's example does;
- BRINK Family test split (private ids), built as the README says (``kgengine load family
  --splits facts``, ``kgengine mine``, ``kgengine brink build --rules``, both KGs loaded with
  ``kgengine load tsv``), learned from the build's train split, answered on the incomplete and
  the complete KG (rules mined on each on first use): the strict BRINK metrics
  (kgengine.eval.metrics.evaluate_records);
- misses by cause, and end-to-end latency per question (p50/p95, Oxigraph).

    python bench/quality.py [--work DIR] [--sample N] [--seed 0] [--holdout 0.2]

Prints a table and writes bench/results/quality.json. The bench reads the gold fields of the
records to score and to tell causes; the answerer sees only each question's text and topic."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("KGENGINE_SHARED", REPO.parent / "shared")) / "datasets"
KGENGINE = str(Path(sys.executable).with_name("kgengine"))


def sh(*args: str) -> None:
    print("$ kgengine " + " ".join(args), flush=True)
    subprocess.run([KGENGINE, *args], check=True, stdout=subprocess.DEVNULL)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def setup(work: Path) -> str:
    store = str(work / "store")
    from kgengine.store import open_store

    with open_store(store) as s:
        names = {g.name for g in s.graphs()}
    if "metaqa" not in names:
        sh("load", "metaqa", "--path", str(DATA / "metaqa"), "--store", store)
    brink = work / "brink-family"
    if "family-facts" not in names:
        sh("load", "family", "--graph", "family-facts", "--splits", "facts", "--store", store)
    if not (brink / "questions_test.jsonl").is_file():
        sh("mine", "--graph", "family-facts", "--store", store, "-o", str(work / "family_rules.tsv"))
        sh("brink", "build", "--graph", "family-facts", "--store", store, "--rules",
           str(work / "family_rules.tsv"), "-o", str(brink))
    for variant in ("incomplete", "complete"):
        if f"brink-family-{variant}" not in names:
            sh("load", "tsv", "--path", str(brink / f"kg_{variant}.tsv"), "--graph",
               f"brink-family-{variant}", "--store", store)
    return store


def setup_fb15k237(work: Path, store: str) -> None:
    from kgengine.store import open_store

    with open_store(store) as s:
        names = {g.name for g in s.graphs()}
    folder = work / "brink-fb15k237"
    if "fb15k-237" not in names:
        sh("load", "fb15k-237", "--path", str(DATA / "fb15k-237"), "--store", store)
    if not (folder / "questions_test.jsonl").is_file():
        sh("brink", "build", "--graph", "fb15k-237", "--store", store, "--max-len", "3", "--max-rules", "300",
           "--question-unit", "grounding", "-o", str(folder))
    for variant in ("incomplete", "complete"):
        if f"brink-fb-{variant}" not in names:
            sh("load", "tsv", "--path", str(folder / f"kg_{variant}.tsv"), "--graph",
               f"brink-fb-{variant}", "--store", store)


# ---- MetaQA ---------------------------------------------------------------------------------
def metaqa_run(store: Any, train: Path, questions: list[Any]) -> dict[str, Any]:
    from kgengine.errors import KGEngineError
    from kgengine.eval.metrics import hit_at_1
    from kgengine.model import Question
    from kgengine.rag.methods import AnswerSettings, build_answerer

    started = time.perf_counter()
    answerer = build_answerer(store, "metaqa", "offline", AnswerSettings(train_paths=(train,)))
    build_seconds = time.perf_counter() - started
    hits: list[float] = []
    latencies: list[float] = []
    causes: Counter[str] = Counter()
    linked_by: Counter[str | None] = Counter()
    for q in questions:
        mark = time.perf_counter()
        try:
            answer = answerer.answer(Question(q.text))
        except KGEngineError:
            latencies.append(time.perf_counter() - mark)
            hits.append(0.0)
            causes["linking: topic not in the KB"] += 1
            continue
        latencies.append(time.perf_counter() - mark)
        linked_by[answer.learned_from] += 1
        top = answer.answers[0].id if answer.answers else None
        hit = hit_at_1(top, q.answers)
        hits.append(hit)
        if hit:
            continue
        gold = {a.lower().strip() for a in q.answers}
        found = {a.id.lower().strip() for a in answer.answers}
        if not answer.answers:
            causes["KB error: the path reaches nothing (missing facts)"] += 1
        elif found & gold:
            causes["ranking: a gold answer is found but not first"] += 1
        elif answer.learned_from != "train":
            causes["linking: unseen pattern linked to a wrong path"] += 1
        else:
            causes["KB error: the path's answers hold no gold answer"] += 1
    return {"n": len(questions), "hit@1": sum(hits) / len(hits) if hits else 0.0,
            "p50_ms": percentile(latencies, 0.5) * 1000, "p95_ms": percentile(latencies, 0.95) * 1000,
            "build_s": build_seconds, "linked_by": dict(linked_by), "misses": dict(causes)}


def metaqa(store_location: str, work: Path, sample: int | None, seed: int, holdout: float) -> dict[str, Any]:
    from kgengine.loaders.metaqa import read_questions
    from kgengine.rag.linking.patterns import pattern_of
    from kgengine.store import open_store

    out: dict[str, Any] = {}
    with open_store(store_location, read_only=True) as store:
        for hops in (1, 2, 3):
            dev = DATA / "metaqa" / f"{hops}-hop" / "qa_dev.txt"
            test = list(read_questions(DATA / "metaqa" / f"{hops}-hop" / "qa_test.txt"))
            chosen = random.Random(seed).sample(test, sample) if sample and sample < len(test) else test
            out[f"{hops}-hop"] = metaqa_run(store, dev, chosen)
            print(f"MetaQA {hops}-hop: {out[f'{hops}-hop']}", flush=True)
            # held-out patterns: a seeded share of dev patterns never learned
            dev_questions = list(read_questions(dev))
            patterns = sorted({pattern_of(q.text, q.topic) for q in dev_questions})
            rng = random.Random(f"{seed}/holdout/{hops}")
            held = set(rng.sample(patterns, round(holdout * len(patterns))))
            folder = work / "heldout" / f"seed{seed}" / f"{hops}-hop"
            folder.mkdir(parents=True, exist_ok=True)
            kept = [line for line, q in zip(dev.read_text(encoding="utf-8").splitlines(), dev_questions,
                                            strict=True) if pattern_of(q.text, q.topic) not in held]
            (folder / "qa_dev.txt").write_text("\n".join(kept) + "\n", encoding="utf-8")
            unseen = [q for q in test if pattern_of(q.text, q.topic) in held]
            unseen = random.Random(seed).sample(unseen, sample) if sample and sample < len(unseen) else unseen
            result = metaqa_run(store, folder / "qa_dev.txt", unseen)
            result["held_out_patterns"] = len(held)
            result["patterns"] = len(patterns)
            out[f"{hops}-hop held-out"] = result
            print(f"MetaQA {hops}-hop held-out patterns: {result}", flush=True)
    return out


# ---- BRINK Family -----------------------------------------------------------------------
def brink(store_location: str, work: Path, name: str = "brink-family", hops: int = 3,
          graphs: str | None = None) -> dict[str, Any]:
    """The strict BRINK metrics of the build in ``work/name`` whose KGs are the graphs
    ``GRAPHS-incomplete`` and ``GRAPHS-complete`` (default GRAPHS = name); ``hops``: the
    longest path learned."""
    from kgengine.eval.metrics import evaluate_records
    from kgengine.rag.batch import read_questions
    from kgengine.rag.graph.steps import parse_path
    from kgengine.rag.methods import AnswerSettings, build_answerer
    from kgengine.rag.offline import OfflineAnswerer
    from kgengine.store import open_store

    folder = work / name
    train, test = folder / "questions_train.jsonl", folder / "questions_test.jsonl"
    gold = [json.loads(line) for line in test.read_text(encoding="utf-8").splitlines()]
    by_id = {r["id"]: r for r in gold}
    out: dict[str, Any] = {}
    with open_store(store_location, read_only=True) as store:
        for variant in ("incomplete", "complete"):
            graph = f"{graphs or name}-{variant}"
            started = time.perf_counter()
            answerer = build_answerer(store, graph, "offline",
                                      AnswerSettings(train_paths=(train,), hops=hops), log=lambda m: None)
            assert isinstance(answerer, OfflineAnswerer)
            build_seconds = time.perf_counter() - started
            predictions: list[dict[str, Any]] = []
            latencies: list[float] = []
            causes: Counter[str] = Counter()
            for qid, question in read_questions(test):
                mark = time.perf_counter()
                answer = answerer.answer(question)
                latencies.append(time.perf_counter() - mark)
                predictions.append({"id": qid, "raw_output": answer.raw_output})
                record = by_id[qid]
                predicted = {a.id for a in answer.answers}
                if record["hard_answer"] in predicted:
                    continue
                # why the hard answer is missing (analysis only: the answerer never saw these fields)
                asked = ("^" if record["direction"] == "inverse" else "") + record["relation"]
                if answer.relation_path != [asked]:
                    causes["linking: wrong relation path"] += 1
                    continue
                topic = answer.topic_entity
                assert topic is not None  # its relation path was linked from it
                pool = answerer.candidates(topic, parse_path([asked]))
                if record["hard_answer"] not in pool:
                    causes["missing rule: no rule of this KG derives it"] += 1
                else:
                    causes["ranking: derived but below the cut"] += 1
            scores: dict[str, Any] = {
                **evaluate_records(gold, predictions).as_dict(),
                "p50_ms": percentile(latencies, 0.5) * 1000, "p95_ms": percentile(latencies, 0.95) * 1000,
                "build_s": build_seconds, "hard_misses": dict(causes),
                "rules": answerer.rules.origin.split(", cached at")[0] if answerer.rules else None,
                "cuts": {str(k): v for k, v in sorted(answerer.thresholds.items())}}
            out[variant] = scores
            print(f"{name} {variant}: {scores}", flush=True)
    out["hhr_ratio"] = out["incomplete"]["hhr"] / out["complete"]["hhr"] if out["complete"]["hhr"] else 0.0
    out["hits_hard_ratio"] = (out["incomplete"]["hits_hard"] / out["complete"]["hits_hard"]
                              if out["complete"]["hits_hard"] else 0.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/kgengine-quality"))
    parser.add_argument("--sample", type=int, default=None, help="seeded sample per hop [default: all]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--holdout", type=float, default=0.2)
    parser.add_argument("--skip-metaqa", action="store_true")
    parser.add_argument("--fb15k237", action="store_true",
                        help="also BRINK FB15k-237 (the README's build: --max-len 3 --max-rules 300 "
                             "--question-unit grounding; one-relation paths; about 20 minutes)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KGENGINE_CACHE", str(args.work / "cache"))
    store = setup(args.work)
    results: dict[str, Any] = {"settings": {"sample": args.sample, "seed": args.seed, "holdout": args.holdout,
                                            "method": "offline", "backend": "oxigraph"}}
    results["brink_family"] = brink(store, args.work)
    if not args.skip_metaqa:
        results["metaqa"] = metaqa(store, args.work, args.sample, args.seed, args.holdout)
    if args.fb15k237:
        setup_fb15k237(args.work, store)
        results["brink_fb15k237"] = brink(store, args.work, "brink-fb15k237", hops=1, graphs="brink-fb")
    table(results)
    out = REPO / "bench" / "results" / "quality.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def table(results: dict[str, Any]) -> None:
    for key, title in (("brink_family", "BRINK Family"), ("brink_fb15k237", "BRINK FB15k-237")):
        if key not in results:
            continue
        b = results[key]
        print(f"\n| {title} test (private ids) | Hits@Any | Precision | Recall | F1 | Hits@Hard | HHR "
              "| p50 ms |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for variant in ("incomplete", "complete"):
            s = b[variant]
            print(f"| {variant} KG | {s['hits_any']:.3f} | {s['precision']:.3f} | {s['recall']:.3f} "
                  f"| {s['f1']:.3f} | {s['hits_hard']:.3f} | {s['hhr']:.3f} | {s['p50_ms']:.1f} |")
        print(f"Hits@Hard ratio {b['hits_hard_ratio']:.3f}, HHR ratio {b['hhr_ratio']:.3f}; hard misses "
              f"(incomplete): {b['incomplete']['hard_misses']}")
    if "metaqa" in results:
        print("\n| MetaQA test | questions | Hit@1 | p50 ms | p95 ms | misses |")
        print("|---|---:|---:|---:|---:|---|")
        for name, s in results["metaqa"].items():
            ranked = sorted(s["misses"].items(), key=lambda kv: -kv[1])
            misses = "; ".join(f"{k}: {v}" for k, v in ranked)
            print(f"| {name} | {s['n']} | {s['hit@1']:.4f} | {s['p50_ms']:.2f} | {s['p95_ms']:.2f} "
                  f"| {misses} |")


if __name__ == "__main__":
    main()
