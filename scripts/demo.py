"""The main job on the embedded default: every pipeline stage, on the bundled Family KG in an
on-disk Oxigraph store (``./demo-store``), through the real CLI: load, query, mine, build a
BRINK set, answer some of its test questions offline on the incomplete KG (with evidence
paths), evaluate the offline method complete vs incomplete, and answer one MetaQA question
when the MetaQA data is at hand (``$KGENGINE_DATA`` or ``../shared/datasets``).

Standard output is the walkthrough (each stage's title, its command and its result); the
commands' progress and log lines go to standard error, so ``make demo > walkthrough.txt``
keeps a clean record and the terminal still shows progress."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
# relative to ROOT (the stages run there): the commands shown read as those of docs/usage.md
STORE = "demo-store"
OUT = Path("demo-out")
BRINK = OUT / "brink-family"
KG = [sys.executable, "-m", "kgengine.cli"]
INCOMPLETE_GRAPH = "family-facts-brink-incomplete"
INCOMPLETE_RULES = OUT / "rules-incomplete.tsv"
QUESTIONS_ASKED = 3  # Family BRINK test questions answered one by one (the eval stage scores all)
# a log line longer than this is cut (a learned-cut list on a graph with many relations runs to
# thousands of characters: a dump, not progress)
MAX_LOG_LINE = 200

STAGES: list[tuple[str, list[str]]] = [
    ("load the bundled Family KG", ["load", "family", "--store", STORE]),
    ("graphs in the store", ["graphs", "--store", STORE]),
    ("statistics", ["stats", "--store", STORE, "--graph", "family"]),
    ("a SPARQL query", ["query", "--store", STORE, "--graph", "family",
                        "SELECT ?r (COUNT(*) AS ?n) WHERE { ?h ?r ?t } "
                        "GROUP BY ?r ORDER BY DESC(?n) LIMIT 5"]),
    # mining and BRINK use facts.txt only, as the official release; the build prints its statistics
    ("load Family facts.txt as BRINK's input", ["load", "family", "--store", STORE,
                                                "--graph", "family-facts", "--splits", "facts"]),
    ("mine Horn rules (AMIE 3 semantics, BRINK's thresholds)",
     ["mine", "--store", STORE, "--graph", "family-facts", "--max-len", "3",
      "-o", str(OUT / "rules.tsv"), "--json", str(OUT / "rules.json")]),
    # --load: its complete and incomplete KGs become graphs family-facts-brink-complete and
    # INCOMPLETE_GRAPH (the incomplete one lacks the removed triples the questions ask about)
    ("build a Family BRINK set (template questions, the mined rules) and load its KGs",
     ["brink", "build", "--store", STORE, "--graph", "family-facts",
      "--rules", str(OUT / "rules.tsv"), "-o", str(BRINK), "--load"]),
    # what `ask` would mine on first use, mined as a stage of its own: the answerer reasons with
    # the incomplete KG's rules only, and its reasoning names this short file, not a cache path
    ("mine the incomplete KG's rules (the answerer's: never the complete KG's)",
     ["mine", "--store", STORE, "--graph", INCOMPLETE_GRAPH, "--max-len", "3",
      "-o", str(INCOMPLETE_RULES)]),
]


def shorten(line: str, limit: int = MAX_LOG_LINE) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… ({len(line):,} characters)"


def _relay(stream: IO[str]) -> None:
    for line in stream:
        sys.stderr.write(shorten(line.rstrip("\n")) + "\n")
        sys.stderr.flush()


class Walkthrough:
    def __init__(self) -> None:
        self.stage = 0
        self.env = {
            **os.environ,
            # the demo's rule and path caches live in its output folder, not the user's cache
            "KGENGINE_CACHE": os.environ.get("KGENGINE_CACHE", str(OUT / "cache")),
            # rich wraps at 80 columns when writing to a pipe: the terminal's width instead
            "COLUMNS": str(shutil.get_terminal_size((160, 24)).columns),
        }

    def run(self, title: str, args: list[str]) -> None:
        """One stage: its title and command on stdout; the command's stderr relayed (lines cut
        to MAX_LOG_LINE) while it runs, its stdout printed once it ends, so the two never
        interleave within a stage."""
        self.stage += 1
        print(f"\n== {self.stage}. {title}\n$ kgengine {shlex.join(args)}", flush=True)
        started = time.monotonic()
        child = subprocess.Popen(KG + args, cwd=ROOT, env=self.env, text=True, encoding="utf-8",
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert child.stdout is not None and child.stderr is not None
        relay = threading.Thread(target=_relay, args=(child.stderr,), daemon=True)
        relay.start()
        output = child.stdout.read()
        code = child.wait()
        relay.join()
        sys.stdout.write(output)
        sys.stdout.flush()
        print(f"(stage {self.stage} took {time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)
        if code != 0:
            print(f"stage failed: {title} (exit status {code})", file=sys.stderr)
            sys.exit(code)


def ask_stages() -> list[tuple[str, list[str]]]:
    """A few test questions of the build, answered offline on the incomplete KG: only the
    question text and topic entity go to `kgengine ask`; it learns from the train split and
    reasons with the rules mined on the incomplete KG (never the complete one)."""
    stages = []
    with (ROOT / BRINK / "questions_test.jsonl").open(encoding="utf-8") as lines:
        for line in list(lines)[:QUESTIONS_ASKED]:
            record = json.loads(line)
            stages.append((f"answer BRINK test question {record['id']} offline (incomplete KG)",
                           ["ask", record["question"], "--entity", record["topic_entity"],
                            "--store", STORE, "--graph", INCOMPLETE_GRAPH, "--rules", str(INCOMPLETE_RULES),
                            "--train", str(BRINK / "questions_train.jsonl")]))
    return stages


def metaqa_dir() -> Path | None:
    for base in (os.environ.get("KGENGINE_DATA"), ROOT.parent / "shared" / "datasets"):
        if base and (Path(base) / "metaqa" / "2-hop" / "qa_dev.txt").is_file():
            found = Path(base) / "metaqa"
            relative = Path(os.path.relpath(found, ROOT))  # ../shared/datasets/metaqa reads better
            return relative if relative.parts[:2] != ("..", "..") else found.resolve()
    return None


def main() -> int:
    started = time.monotonic()
    shutil.rmtree(ROOT / STORE, ignore_errors=True)
    shutil.rmtree(ROOT / OUT, ignore_errors=True)
    (ROOT / OUT).mkdir()
    demo = Walkthrough()
    for title, args in STAGES:
        demo.run(title, args)
    for title, args in ask_stages():
        demo.run(title, args)
    demo.run("evaluate the offline method on the Family BRINK test split, complete vs incomplete",
             ["eval", "--questions", str(BRINK), "--method", "offline", "--store", STORE,
              "-o", str(OUT / "eval-family")])
    metaqa = metaqa_dir()
    if metaqa is None:
        print("\n(MetaQA not found in $KGENGINE_DATA or ../shared/datasets: its stage is skipped)")
    else:
        demo.run("load MetaQA's movie KB", ["load", "metaqa", "--path", str(metaqa), "--store", STORE])
        demo.run("answer a 2-hop MetaQA question offline (paths learned from 2-hop dev)",
                 ["ask", "which person directed the movies starred by [John Krasinski]", "--store", STORE,
                  "--graph", "metaqa", "--train", str(metaqa / "2-hop" / "qa_dev.txt")])
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s: store in {STORE}/, outputs in {OUT}/ "
          f"(plots: {OUT / 'eval-family'}/*.png)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
