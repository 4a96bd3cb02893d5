"""The README's shell examples and those of its step-by-step guide (docs/usage.md) run as
written, in the order written, on the bundled Family data: every command of their ```bash
blocks, the README's then the guide's, one after another in one working directory and one store
(``$KGENGINE_STORE``), then each example of the README's command table on a copy of the store
that walkthrough left, and the guide's loading table. Each runs through bash, so quoting,
``\\`` continuations, comments and redirections are the pages' own. Examples that need a
network, an LLM, Neo4j, a server or a dataset that is not bundled are skipped, each named in
SKIPPED with its reason (and every entry there must still match an example, so the list cannot
go stale)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "usage.md"  # the README's commands step by step: its walkthrough goes on there
PAGES = (README, GUIDE)
# the walkthrough mines, builds a BRINK set and evaluates it: ~2 min on 2 cores
slow = pytest.mark.slow

# the start of an example -> why it does not run here (the longest matching start wins)
SKIPPED: dict[str, str] = {
    "make demo": "the demo itself (scripts/demo.py), which runs these same stages",
    "make test": "the whole test suite, this test included",
    "pip install": "installs packages from the network",
    "CMAKE_ARGS=": "builds llama.cpp from source from the network (the local-llm extra)",
    "kgengine llm ": "needs the local-llm extra (the packaged LLM)",
    "kgengine load family && kgengine ask": "answers with an LLM (--method llm-kg)",
    "export ": "configures an LLM endpoint",
    "kgengine serve": "starts a server in the background (tests/test_serve*.py run it)",
    "curl ": "queries that server",
    "kgengine load fb15k-237": "FB15k-237 is not bundled (a dataset of ../shared)",
    "kgengine brink build --graph fb15k-237": "FB15k-237 is not bundled",
    'kgengine ask "which person directed': "MetaQA is not bundled",
    "kgengine eval --questions metaqa-2hop": "MetaQA is not bundled",
    "kgengine query --store neo4j://": "needs a Neo4j server (tests/test_query_neo4j.py)",
    "kgengine load wikidata5m": "Wikidata5m is not bundled",
    "kgengine load metaqa": "MetaQA is not bundled",
    "kgengine load brink --path": "the official BRINK release is not bundled",
    "kgengine load tsv --path my-kg.tsv": "reads the reader's own file",
    "kgengine load rdf --path my-kg.ttl": "reads the reader's own file",
}
# the start of an example -> text its standard output must hold
EXPECTED: dict[str, str] = {
    "kgengine load family": "loaded graph 'family'",
    "kgengine load family --replace": "loaded graph 'family'",
    "kgengine load family --splits facts": "loaded graph 'family-facts'",
    "kgengine query --graph family \\": "nephew",  # Family's most frequent relation
    "kgengine query --graph family 'SELECT ?r ?t": "http://kgengine.org/r/",
    "kgengine graphs": "family-facts",
    "kgengine stats --graph family --json": '"triples": 28356',
    "kgengine mine": "145 rules",
    "kgengine groundings": "?a",
    "kgengine brink build": "wrote kg_complete.tsv",
    "kgengine brink stats": "BRINK",
    "kgengine load tsv --path brink-family/kg_incomplete.tsv": "loaded graph 'brink-family-incomplete'",
    'kgengine ask "Who is the niece of e1147?"': "answers:",
    "kgengine entity e1147": "e1147",
    "kgengine neighbours": "aunt",
    "kgengine eval --questions brink-family": "brink-family:test/incomplete/offline",
    "kgengine eval score": '"hits_any"',
}


@dataclass(frozen=True)
class Example:
    command: str  # as written, continuation lines joined by bash's own "\\\n"
    page: str  # the page it is on, relative to the repository root
    line: int  # where it starts on that page

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.command}"


def longest_match(table: dict[str, str], command: str) -> str | None:
    keys = [k for k in table if command.startswith(k)]
    return table[max(keys, key=len)] if keys else None


def block_examples(page: Path) -> list[Example]:
    """The commands of every ```bash block of the page, in order (comment-only lines dropped)."""
    out: list[Example] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    inside, pending, start = False, "", 0
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            inside = line.strip() == "```bash"
            continue
        if not inside or (not pending and (not line.strip() or line.lstrip().startswith("#"))):
            continue
        if not pending:
            start = number
        pending = f"{pending}\n{line}" if pending else line
        if not line.endswith("\\"):
            out.append(Example(pending, name(page), start))
            pending = ""
    return out


COMMANDS_TABLE = "| command | example |"
LOADING_TABLE = "| dataset | example | reads |"


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def table_examples(page: Path, header_line: str = COMMANDS_TABLE) -> list[Example]:
    """The example column (the second) of the page's table with this header, in order."""
    out = []
    lines = page.read_text(encoding="utf-8").splitlines()
    header = lines.index(header_line)
    for number, line in enumerate(lines[header + 2:], header + 3):
        if not line.startswith("|"):
            break
        example = line.split("|")[2]
        if (code := re.search(r"`(kgengine [^`]+)`", example)) is not None:
            out.append(Example(code.group(1), name(page), number))
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return workspace(tmp_path_factory.mktemp("readme"))


def workspace(root: Path) -> Path:
    """``root/cwd`` (the working directory, the store ``./kg`` in it) and ``root/bin/kgengine``."""
    (root / "bin").mkdir()
    (root / "cwd").mkdir()
    shim = root / "bin" / "kgengine"  # `kgengine` is this interpreter's, wherever the tests run
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m kgengine.cli "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return root


def environment(root: Path) -> dict[str, str]:
    # no LLM endpoint, data folder or config of the caller's: `ask` stays offline, as written
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KGENGINE_", "OPENAI_"))}
    return {**env, "PATH": f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            # the README's `--store ./kg` and the default store are the same one
            "KGENGINE_STORE": str(root / "cwd" / "kg"), "KGENGINE_CACHE": str(root / "cache"),
            "KGENGINE_CONFIG": str(root / "no-config.toml"), "COLUMNS": "200"}


def run(root: Path, example: Example) -> None:
    done = subprocess.run(["bash", "-c", example.command], cwd=root / "cwd", env=environment(root),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{example}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
    expected = longest_match(EXPECTED, example.command)
    if expected is not None:
        assert expected in done.stdout, f"{example}\n{expected!r} not in:\n{done.stdout}"


def runnable(examples: list[Example]) -> list[Example]:
    return [e for e in examples if longest_match(SKIPPED, e.command) is None]


def walkthrough_examples() -> list[Example]:
    """The ```bash examples of the README, then those of docs/usage.md, which continue them."""
    return [e for page in PAGES for e in block_examples(page)]


def test_every_skip_is_an_example_and_the_main_commands_run() -> None:
    examples = [e.command for e in (*walkthrough_examples(), *table_examples(README),
                                    *table_examples(GUIDE, LOADING_TABLE))]
    stale = [k for k in SKIPPED if not any(c.startswith(k) for c in examples)]
    assert not stale, f"SKIPPED names examples the README and docs/usage.md no longer have: {stale}"
    ran = {c.split()[1] for c in examples if longest_match(SKIPPED, c) is None}
    assert ran >= {"load", "graphs", "stats", "query", "mine", "brink", "ask", "eval", "entity"}


@pytest.fixture(scope="module")
def walkthrough(work: Path) -> Path:
    """Every ```bash example in order, in one directory and one store."""
    for example in runnable(walkthrough_examples()):
        run(work, example)
    return work


@slow
def test_the_bash_blocks_run_in_the_order_written(walkthrough: Path) -> None:
    cwd = walkthrough / "cwd"
    answers = [json.loads(line) for line in (cwd / "answers.jsonl").read_text().splitlines()]
    test_split = (cwd / "brink-family" / "questions_test.jsonl").read_text().splitlines()
    assert len(answers) == len(test_split) and all("error" not in a for a in answers)
    summary = json.loads((cwd / "eval-family" / "summary.json").read_text())
    assert {k.rsplit("/", 2)[1] for k in summary["settings"]} == {"complete", "incomplete"}


@slow
def test_the_command_table_examples_run(walkthrough: Path) -> None:
    """Each row of the command table on a fresh copy of the store the walkthrough left (a
    row's `drop` does not take a graph from the rows after it)."""
    cwd = walkthrough / "cwd"
    pristine = walkthrough / "kg-after-walkthrough"
    shutil.copytree(cwd / "kg", pristine)
    examples = runnable(table_examples(README))
    assert len(examples) >= 12
    for example in examples:
        shutil.rmtree(cwd / "kg")
        shutil.copytree(pristine, cwd / "kg")
        run(walkthrough, example)
    assert len((cwd / "family.tsv").read_text().splitlines()) == 28356  # the export row


def test_the_loading_table_examples_run(tmp_path: Path) -> None:
    """The load examples of the guide's Loading table, each into a new store."""
    work = workspace(tmp_path)
    examples = runnable(table_examples(GUIDE, LOADING_TABLE))
    assert [e.command for e in examples] == ["kgengine load family"]
    for example in examples:
        shutil.rmtree(work / "cwd" / "kg", ignore_errors=True)
        run(work, example)
