"""``kgengine load`` through the real CLI: bad input (file:line and text, non-zero exit, store
unchanged), idempotence, --replace, and a load killed with SIGKILL half-way."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import kgengine, run_cli
from kgengine.errors import GraphIncompleteError, InputError
from kgengine.model import Triple
from kgengine.oxigraph import bulk
from kgengine.oxigraph.bulk import SPOOL_PREFIX
from kgengine.oxigraph.store import OxigraphStore
from load_helpers import entities_of, raw_triples, write_wikidata5m

GOOD = ["a\tknows\tb", "b\tknows\tc", "c\tlikes\ta", "a\tknows\tb"]  # one duplicate


def snapshot(kg_store: Path) -> dict[str, Any]:
    """Everything observable about the store's graphs, and whether a spool was left behind."""
    with OxigraphStore(str(kg_store)) as store:
        graphs = {
            g.name: (g.status, g.triples, g.loaded_at, sorted(store.triples(g.name)),
                     store.labels(g.name), store.private_ids(g.name))
            for g in store.graphs()
        }
        quads = len(store._store)  # every quad of every graph: no stray leftovers either
    return {"graphs": graphs, "quads": quads,
            "spools": sorted(p.name for p in kg_store.glob(SPOOL_PREFIX + "*"))}


@pytest.fixture
def kg_store(tmp_path: Path) -> Path:
    """A store holding graph 'kg' (3 distinct triples from a 4-line file)."""
    good = tmp_path / "kg.tsv"
    good.write_text("\n".join(GOOD) + "\n")
    kgengine("load", "tsv", "--path", str(good), "--store", str(tmp_path / "store"))
    return tmp_path / "store"


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def many_good_lines(n: int) -> list[str]:
    return [f"e{i}\tr{i % 7}\te{i + 1}" for i in range(n)]


def bad_tsv(tmp: Path, line: str) -> tuple[list[str], Path, int, str]:
    # the bad line comes after many good ones: nothing before it may reach the store
    lines = many_good_lines(30_000) + [line] + many_good_lines(10)
    path = write(tmp / "bad" / "kg2.tsv", lines)
    return ["tsv", "--path", str(path)], path, 30_001, line


def bad_metaqa(tmp: Path, line: str) -> tuple[list[str], Path, int, str]:
    path = write(tmp / "metaqa" / "kb.txt", ["Kismet|directed_by|William Dieterle", line])
    return ["metaqa", "--path", str(path.parent)], path, 2, line


def bad_alias(tmp: Path, line: str) -> tuple[list[str], Path, int, str]:
    write_wikidata5m(tmp / "wd")
    path = write(tmp / "wd" / "wikidata5m_entity.txt", ["Q1\tDouglas Adams", "Q2\tZaphod", line])
    return ["wikidata5m", "--path", str(path.parent)], path, 3, line


@pytest.mark.parametrize(
    ("make", "line", "reason"),
    [
        (bad_tsv, "e1\tr1", "expected 3 fields separated by '\\t', got 2"),
        (bad_tsv, "e1\tr1\te2\textra", "expected 3 fields separated by '\\t', got 4"),
        (bad_tsv, "e1\t\te2", "empty field"),
        (bad_metaqa, "Kismet|written_by|Edward|Knoblock", "expected 3 fields separated by '|', got 4"),
        (bad_metaqa, "Kismet||Edward Knoblock", "empty field"),
        (bad_alias, "Q5", "expected 'id<TAB>name[<TAB>alias...]'"),
    ],
)
@pytest.mark.parametrize("replace", [False, True])
def test_bad_line_fails_with_location_and_leaves_store_unchanged(
    kg_store: Path, tmp_path: Path, make: Any, line: str, reason: str, replace: bool
) -> None:
    args, path, number, text = make(tmp_path, line)
    # with --replace, the bad input targets the existing graph, which must survive
    extra = ["--graph", "kg", "--replace"] if replace else []
    before = snapshot(kg_store)
    result = run_cli("load", *args, "--store", str(kg_store), *extra)
    assert result.exit_code != 0
    assert f"{path}:{number}: {reason}: {text!r}" in result.output
    assert "Traceback" not in result.output
    assert snapshot(kg_store) == before


def test_missing_split_file_and_unknown_dataset(kg_store: Path, tmp_path: Path, datasets_dir: Path) -> None:
    before = snapshot(kg_store)
    family = tmp_path / "family"
    shutil.copytree(datasets_dir / "family", family)
    (family / "valid.txt").unlink()
    result = run_cli("load", "family", "--path", str(family), "--store", str(kg_store))
    assert result.exit_code != 0 and f"split 'valid': {family / 'valid.txt'} does not exist" in result.output
    result = run_cli("load", "family", "--splits", "facts,dev", "--store", str(kg_store))
    assert result.exit_code != 0 and "unknown split(s) dev" in result.output
    result = run_cli("load", "yago", "--store", str(kg_store))
    assert result.exit_code != 0
    assert "'yago' is not one of" in result.output and "'fb15k-237'" in result.output
    result = run_cli("load", "fb15k-237", "--store", str(kg_store), "--path", str(tmp_path / "nowhere"))
    assert result.exit_code != 0 and "does not exist" in result.output
    assert snapshot(kg_store) == before


def test_loading_twice_refuses_and_replace_reloads(kg_store: Path, tmp_path: Path) -> None:
    before = snapshot(kg_store)
    assert before["graphs"]["kg"][:2] == ("complete", 3)
    result = run_cli("load", "tsv", "--path", str(tmp_path / "kg.tsv"), "--store", str(kg_store))
    assert result.exit_code != 0
    assert "graph 'kg' already exists" in result.output and "--replace" in result.output
    assert snapshot(kg_store) == before
    again = ["load", "tsv", "--path", str(tmp_path / "kg.tsv"), "--store", str(kg_store), "--replace"]
    for _ in range(2):  # --replace any number of times: never duplicates
        out = kgengine(*again)
        assert "3 triples" in out
        after = snapshot(kg_store)
        assert after["graphs"]["kg"][3] == before["graphs"]["kg"][3] and after["spools"] == []
    # --replace with other content really replaces (nothing of the old graph stays)
    write(tmp_path / "kg.tsv", ["x\tr\ty"])
    kgengine(*again)
    graph = snapshot(kg_store)["graphs"]["kg"]
    assert graph[1] == 1 and [tuple(t) for t in graph[3]] == [("x", "r", "y")]
    assert set(graph[5]) == {"x", "y"}


def test_leftovers_of_an_interrupted_load_are_discarded(tmp_path: Path) -> None:
    """A big load killed after the Rust loader has written some batches leaves part of the
    graph behind, marked 'loading' (FB15k-237 fits in one batch, so the kill test below
    cannot show it): the next load must discard every leftover quad."""
    store = tmp_path / "store"
    with OxigraphStore(str(store)) as opened:
        opened.load("kg", [Triple("junk", "r", "a"), Triple("a", "knows", "b")], dataset="tsv",
                     labels=[("junk", "Junk"), ("a", "A")])
        opened._set_meta("kg", {"dataset": "tsv", "status": "loading"})  # as a killed load leaves it
    write(tmp_path / "kg.tsv", GOOD)
    kgengine("load", "tsv", "--path", str(tmp_path / "kg.tsv"), "--store", str(store))
    graph = snapshot(store)["graphs"]["kg"]
    assert graph[0:2] == ("complete", 3)
    assert set(graph[3]) == {Triple(*line.split("\t")) for line in GOOD}
    assert graph[4] == {} and set(graph[5]) == {"a", "b", "c"}


def _start_load(store: Path, fb15k: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "kgengine.cli", "load", "fb15k-237", "--path", str(fb15k),
         "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def _kill_when(proc: subprocess.Popen[str], phase: str, delay: float) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:  # the CLI logs one line per phase when stderr is not a terminal
        if phase in line:
            time.sleep(delay)
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)


@pytest.mark.slow
def test_sigkill_mid_load_then_rerun_gives_exact_counts(datasets_dir: Path, tmp_path: Path) -> None:
    fb15k = datasets_dir / "fb15k-237"
    store = tmp_path / "store"
    # killed while reading the input: the store has no trace of the graph
    # (at once: reading FB15k-237 takes far longer than a signal, a fixed delay may not)
    _kill_when(_start_load(store, fb15k), "reading and checking", 0.0)
    with OxigraphStore(str(store)) as opened:
        assert opened.graph_info("fb15k-237") is None
    # killed inside the Rust bulk load: the store opens and shows the graph as 'loading'
    for delay in (0.5, 0.2, 0.0):
        _kill_when(_start_load(store, fb15k), "bulk loading", delay)
        with OxigraphStore(str(store)) as opened:
            info = opened.graph_info("fb15k-237")
            assert info is not None
            if info.status == "loading":
                break
            opened.drop("fb15k-237")  # finished before the kill: try again, earlier
    assert info.status == "loading"
    with OxigraphStore(str(store)) as opened, pytest.raises(GraphIncompleteError, match="interrupted load"):
        opened.require_graph("fb15k-237", complete=True)
    assert "loading" in kgengine("graphs", "--store", str(store))
    # the rerun (no --replace needed) discards the leftovers and loads exactly
    out = kgengine("load", "fb15k-237", "--path", str(fb15k), "--store", str(store))
    assert "discarding the stored graph (loading)" in out
    triples = [t for s in ("train", "valid", "test") for t in raw_triples(fb15k / f"{s}.txt")]
    with OxigraphStore(str(store)) as opened:
        info = opened.graph_info("fb15k-237")
        assert info is not None and info.status == "complete" and info.triples == len(set(triples)) == 310_116
        stats = opened.stats("fb15k-237")
        assert (stats.triples, stats.entities, stats.relations) == (310_116, 14_541, 237)
        assert stats.entities == len(entities_of(triples))
        assert len(opened.labels("fb15k-237")) == len(opened.private_ids("fb15k-237")) == 14_541
    assert not list(store.glob(SPOOL_PREFIX + "*"))


class _ChangesUnderneath:
    """Triples that read fine once and then fail (a file changed between the check and the
    load): the load must stop, with the error, and leave nothing behind."""

    def __init__(self) -> None:
        self.passes = 0

    def __iter__(self) -> Iterator[Triple]:
        self.passes += 1
        for i in range(50_000):
            if self.passes > 1 and i == 40_000:
                raise InputError("kg.tsv", i + 1, "broken", "changed on disk")
            yield Triple(f"e{i}", "r", f"e{i + 1}")


@pytest.mark.parametrize("pipes", [True, False])
def test_failure_while_streaming_leaves_nothing(kg_store: Path, monkeypatch, pipes: bool) -> None:
    monkeypatch.setattr(bulk, "USE_PIPES", pipes)
    before = snapshot(kg_store)
    with OxigraphStore(str(kg_store)) as store, pytest.raises(InputError, match="kg.tsv:40001: changed"):
        store.load("other", _ChangesUnderneath(), dataset="tsv")
    assert snapshot(kg_store) == before


def test_spool_file_path_where_there_are_no_pipes(tmp_path: Path, monkeypatch, datasets_dir: Path) -> None:
    monkeypatch.setattr(bulk, "USE_PIPES", False)
    kgengine("load", "brink", "--path", str(datasets_dir / "brink-family"), "--store", str(tmp_path / "s"))
    facts = raw_triples(datasets_dir / "family" / "facts.txt")
    graph = snapshot(tmp_path / "s")
    assert graph["spools"] == [] and set(graph["graphs"]["brink"][3]) == set(facts)
    assert len(graph["graphs"]["brink"][5]) == len(entities_of(facts))
