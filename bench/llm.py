"""Every LLM method beside ``offline``, with the packaged local model (SmolLM2-135M-Instruct,
``kgengine llm serve``, 1 thread) or any endpoint you name — measured through the real CLI
(``kgengine eval``), the response cache off (latencies are the model's):

- MetaQA 1/2/3-hop test, a seeded sample per hop, relation paths learned from dev: Hit@1;
- BRINK Family test split (built as the README says), complete vs incomplete KG, private
  ids and dataset ids (BRINK Fig. 4's question: does the model lean on memorised names? Family
  has no text labels, so ``--labels text`` is an error there and its dataset ids stand in);
- the planning method against ``offline`` where the offline linker is weakest: MetaQA with
  20% of the text patterns, and with 20% of the question types, withheld from learning;
- per setting: p50/p95 latency per question, LLM requests, prompt and completion tokens per
  question (``kgengine eval``'s cost table).

    python bench/llm.py [--sample 5] [--work DIR] [--base-url URL --model NAME] [--parts ...]

Prints the tables and writes bench/results/llm.json. Against a 7B model on a GPU server:
``--base-url http://HOST:8000/v1 --model Qwen/Qwen2.5-7B-Instruct`` (vLLM) — see docs/llm.md."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("KGENGINE_SHARED", REPO.parent / "shared")) / "datasets"
KGENGINE = str(Path(sys.executable).with_name("kgengine"))
RESULTS = REPO / "bench" / "results" / "llm.json"
LLM_METHODS = ("llm", "llm-qd", "llm-kg", "full", "tog", "plan")
PARTS = ("metaqa", "brink", "heldout")


def sh(*args: str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    print("$ kgengine " + " ".join(args[1:]), file=sys.stderr, flush=True)
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(args)}\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def evaluate(out: Path, endpoint: list[str], *args: str) -> dict[str, Any]:
    seconds = sh(
        KGENGINE, "eval", *args, "--no-plots", *endpoint, "--option", "llm_cache=off", "-o", str(out)
    )
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {
        "command": "kgengine eval " + " ".join(args),
        "seconds": round(seconds, 1),
        "settings": summary["settings"],
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        "| part | setting | Hit@1 | Hits@Any | F1 | Hits@Hard | errors | p50 ms | p95 ms | requests | "
        "prompt tok. | completion tok. |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(value: Any) -> str:
        return "–" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

    for part, run in results.items():
        for key, s in run["settings"].items():
            cost = s.get("cost", {})
            lines.append(
                f"| {part} | {key} | "
                + " | ".join(
                    cell(v)
                    for v in (
                        s.get("hit@1"),
                        s.get("hits_any"),
                        s.get("f1"),
                        s.get("hits_hard"),
                        s.get("errors"),
                        cost.get("p50_ms"),
                        cost.get("p95_ms"),
                        cost.get("requests_per_question"),
                        cost.get("prompt_tokens_per_question"),
                        cost.get("completion_tokens_per_question"),
                    )
                )
                + " |"
            )
    return "\n".join(lines)


def family_build(store: Path, build: Path, env: dict[str, str]) -> Path:
    """The BRINK Family build of the README (AMIE 3's rules, the bundled facts)."""
    if not (build / "questions_test.jsonl").exists():
        rules = REPO / "engine" / "brink" / "data" / "family_amie3_len3.tsv"
        sh(KGENGINE, "load", "family", "--splits", "facts", "--graph", "family-facts", "--store", str(store),
           env=env)
        sh(KGENGINE, "brink", "build", "--graph", "family-facts", "--store", str(store),
           "--rules", str(rules), "-o", str(build), env=env)
    return build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=5, help="questions per question set (seed 0)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kgengine-bench-llm"))
    parser.add_argument("--base-url", default=None,
                        help="an OpenAI-compatible endpoint [default: the packaged model, started "
                        "for the run]")
    parser.add_argument("--model", default=None)
    parser.add_argument("--methods", default=",".join(LLM_METHODS))
    parser.add_argument("--parts", default=",".join(PARTS))
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    args.work.mkdir(parents=True, exist_ok=True)
    store = args.work / "store"
    env = {**os.environ, "KGENGINE_CACHE": str(args.work / "cache"), "KGENGINE_DATA": str(DATA)}
    os.environ.update(env)
    results: dict[str, Any] = {}
    with ExitStack() as stack:
        if args.base_url is None:
            from kgengine.llm.local import LocalServer, find_model

            local = stack.enter_context(LocalServer(find_model(None), port=0)).start()
            base_url, name = local.base_url, local.model
            model = (f"{local.model} (packaged, {local.threads} thread(s), "
                     f"{local.context_length}-token context)")
        else:
            base_url, name, model = args.base_url, args.model, f"{args.model} at {args.base_url}"
        endpoint = ["--option", f"llm_base_url={base_url}", "--option", f"llm_model={name}"]
        common = ["--sample", str(args.sample), "--store", str(store)]
        methods = ["--method", "offline," + args.methods]
        sets = ["--questions", "metaqa-1hop", "--questions", "metaqa-2hop", "--questions", "metaqa-3hop",
                "--graph", "metaqa"]
        if not (store / "metaqa-loaded").exists() and ("metaqa" in parts or "heldout" in parts):
            sh(KGENGINE, "load", "metaqa", "--path", str(DATA / "metaqa"), "--store", str(store), env=env)
            (store / "metaqa-loaded").touch()
        if "metaqa" in parts:
            results["metaqa"] = evaluate(args.work / "metaqa", endpoint, *sets, *methods, *common)
        if "brink" in parts:
            build = family_build(store, args.work / "brink-family", env)
            for labels in ("private", "dataset"):
                results[f"brink-family-{labels}"] = evaluate(
                    args.work / f"brink-{labels}", endpoint, "--questions", str(build), "--labels", labels,
                    *methods, *common)
        if "heldout" in parts:
            for by in ("pattern", "qtype"):
                results[f"metaqa-heldout-{by}"] = evaluate(
                    args.work / f"heldout-{by}", endpoint, *sets, "--method", "offline,plan",
                    "--heldout-share", "0.2", "--heldout-by", by, "--sample", str(args.sample * 4),
                    "--store", str(store))
    print(f"model: {model}; sample {args.sample} per set (seed 0); LLM response cache off\n")
    print(table(results))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    report = {"model": model, "sample": args.sample, "results": results}
    RESULTS.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
