"""Everyday CLI use (issue 11, items 5, 7, 10, 11): empty or meaningless work is not
success, tables never cut an identifier, long work names its phase with a total and an
ETA, ``mine`` uses the available cores and gives the same rules whatever their number."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import Result
from helpers.cli import run_cli as cli
from kgengine.mining.search import available_cores
from kgengine.progress import PhaseLog, eta_text
from kgengine.store import open_store

# two relation names longer than any table column, equal but for their last characters
LONG_A = "/film/film/" + "release_date_s" * 8 + "/film_release_region"
LONG_B = "/film/film/" + "release_date_s" * 8 + "/film_release_distribution_medium"
LONG_GRAPH = "brink-fb15k-237-incomplete-" + "x" * 60 + "-variant-a"


def failed_cleanly(result: Result) -> bool:
    clean_exit = isinstance(result.exception, SystemExit)
    return result.exit_code != 0 and clean_exit and "Traceback" not in result.output


@pytest.fixture
def long_names_store(tmp_path: Path) -> Path:
    kg = tmp_path / "kg.tsv"
    kg.write_text(f"a\t{LONG_A}\tb\nb\t{LONG_B}\tc\nc\t{LONG_B}\ta\n")
    store = tmp_path / "store"
    result = cli("load", "tsv", "--path", str(kg), "--store", str(store), "--graph", LONG_GRAPH)
    assert result.exit_code == 0, result.output
    return store


# ---- item 5: empty or meaningless work ---------------------------------------------------
def test_loading_an_empty_file_is_refused_unless_allowed(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    store = str(tmp_path / "store")
    refused = cli("load", "tsv", "--path", str(empty), "--store", store, "--graph", "e")
    assert failed_cleanly(refused) and "has no triples" in refused.output
    assert "--allow-empty" in refused.output
    listed = cli("graphs", "--store", store, "--json")
    assert listed.exit_code == 0 and json.loads(listed.output) == {}  # nothing was stored
    allowed = cli("load", "tsv", "--path", str(empty), "--store", store, "--graph", "e", "--allow-empty")
    assert allowed.exit_code == 0, allowed.output
    assert json.loads(cli("graphs", "--store", store, "--json").output)["e"]["triples"] == 0


@pytest.mark.parametrize("command", [["load", "family"], ["stats"], ["mine"],
                                     ["groundings", "?a r ?b => ?b r ?a"]])
def test_an_empty_graph_name_is_an_error(command: list[str], tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert cli("load", "family", "--store", store, "--splits", "facts").exit_code == 0
    result = cli(*command, "--store", store, "--graph", "")
    assert failed_cleanly(result) and "--graph must not be empty" in result.output, result.output


@pytest.mark.slow
def test_stats_says_a_graph_is_incomplete(datasets_dir: Path, tmp_path: Path) -> None:
    """A first load killed (kill -9) while writing leaves a graph marked loading: stats says so."""
    store = str(tmp_path / "store")
    process = subprocess.Popen(
        [sys.executable, "-m", "kgengine.cli", "load", "fb15k-237", "--path", str(datasets_dir / "fb15k-237"),
         "--store", store, "--graph", "fb", "--splits", "train"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "writing" in line:
            time.sleep(0.5)
            break
    assert process.poll() is None
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()
    with open_store(store, create=False) as opened:
        assert opened.require_graph("fb").status == "loading"
    for args in (["--graph", "fb"], []):
        shown = cli("stats", "--store", store, *args)
        assert shown.exit_code == 0
        assert "graph 'fb' is incomplete" in shown.stderr and "INCOMPLETE" in shown.stdout
    as_json = cli("stats", "--store", store, "--graph", "fb", "--json")
    assert json.loads(as_json.stdout)["fb"]["complete"] is False


def test_brink_build_with_rules_that_cannot_ground_fails(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert cli("load", "family", "--store", store, "--splits", "facts").exit_code == 0
    absent = tmp_path / "absent.tsv"
    absent.write_text("Body\tHead\n?a  likes  ?b\t?a  hates  ?b\n")
    result = cli("brink", "build", "--store", store, "--graph", "family", "--rules", str(absent),
                 "-o", str(tmp_path / "out1"))
    assert failed_cleanly(result) and f"no rule of {absent} has a grounding" in result.output
    assert "hates, likes" in result.output and not (tmp_path / "out1").exists()  # refused before work
    # relations that occur, but no fact matches: nobody is the husband of their husband
    unmatched = tmp_path / "unmatched.tsv"
    unmatched.write_text("Body\tHead\n?a  husband  ?b  ?b  husband  ?a\t?a  wife  ?b\n")
    result = cli("brink", "build", "--store", store, "--graph", "family", "--rules", str(unmatched),
                 "-o", str(tmp_path / "out2"))
    assert failed_cleanly(result) and "no rule has a grounding in graph 'family'" in result.output
    # a rule whose groundings were capped (not all counted) is not "no grounding"
    capped = tmp_path / "capped.tsv"
    capped.write_text("Body\tHead\n?b  husband  ?a\t?a  wife  ?b\n")
    result = cli("brink", "build", "--store", store, "--graph", "family", "--rules", str(capped),
                 "--max-candidates", "20", "--groundings-per-rule", "5", "-o", str(tmp_path / "out3"))
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "out3" / "stats.json").read_text())
    assert stats["groundings"]["capped_rules"] == 1 and stats["groundings"]["candidates"] is None
    assert stats["groundings"]["kept"] == 5


# ---- item 7: tables that never cut an identifier -----------------------------------------
def test_piped_tables_are_plain_and_whole(long_names_store: Path) -> None:
    stats = cli("stats", "--store", str(long_names_store), "--graph", LONG_GRAPH)
    assert stats.exit_code == 0, stats.output
    rows = {line.split()[0]: line.split()[1] for line in stats.stdout.splitlines()[2:]}
    assert rows == {LONG_B: "2", LONG_A: "1"}
    listed = cli("graphs", "--store", str(long_names_store))
    assert listed.stdout.splitlines()[1].split()[:4] == [LONG_GRAPH, "tsv", "3", "complete"]
    assert "…" not in stats.output + listed.output


@pytest.mark.parametrize("columns", ["80", "40"])
def test_terminal_tables_wrap_instead_of_cutting(long_names_store: Path, columns: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kgengine.commands.kg.stdout_is_terminal", lambda: True)
    monkeypatch.setattr("kgengine.commands.kg.shutil.get_terminal_size",
                        lambda fallback=(80, 24): os.terminal_size((int(columns), 24)))
    env = {"COLUMNS": columns}
    for args in (["stats", "--graph", LONG_GRAPH], ["graphs"]):
        result = cli(*args, "--store", str(long_names_store), env=env)
        assert result.exit_code == 0, result.output
        assert "…" not in result.output
        boxed = "┃" in result.output or "│" in result.output
        assert boxed == (columns == "80")  # a table on a wide terminal, plain columns on a narrow one
        # a name folded inside its (first) cell reads whole once its pieces are joined
        lines = result.output.splitlines()
        first_cells = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
        for name in ([LONG_A, LONG_B] if args[0] == "stats" else [LONG_GRAPH]):
            assert name in (first_cells if boxed else result.output)


def test_graphs_json(long_names_store: Path) -> None:
    result = cli("graphs", "--store", str(long_names_store), "--json")
    info = json.loads(result.stdout)[LONG_GRAPH]
    assert (info["dataset"], info["triples"], info["status"]) == ("tsv", 3, "complete")


# ---- item 10: progress with phases, totals and an ETA ------------------------------------
def test_load_replace_and_drop_name_their_phases_with_totals(tmp_path: Path, datasets_dir: Path) -> None:
    store = str(tmp_path / "store")
    family = datasets_dir / "family"
    lines = {line for split in ("facts", "train", "valid", "test")
             for line in (family / f"{split}.txt").read_text().splitlines() if line.strip()}
    first = cli("load", "family", "--path", str(family), "--store", store)
    assert first.exit_code == 0, first.output
    for phase in ("reading and checking the input", f"bulk loading: writing {len(lines):,} triples",
                  "indexing and committing", "marking the graph complete", f"{len(lines):,} triples loaded"):
        assert f"family: {phase}" in first.stderr
    again = cli("load", "family", "--path", str(family), "--store", store, "--replace")
    assert "family: switching to the new graph" in again.stderr
    assert "family: removing the replaced graph" in again.stderr
    dropped = cli("drop", "family", "--store", store, "--yes")
    assert dropped.exit_code == 0 and "family: removing the graph (" in dropped.stderr


def test_phase_log_prints_count_total_and_eta() -> None:
    out = io.StringIO()
    log = PhaseLog(every=0.0, stream=out)
    log.start("g: writing 400 triples", total=400)
    time.sleep(0.01)
    log.advance(100)
    first, second = out.getvalue().splitlines()
    assert first == "g: writing 400 triples"
    assert second.startswith("g: writing 400 triples: 100/400 (25%), ETA ")
    assert eta_text(100, 400, 2.0) == "100/400 (25%), ETA 6 s"  # 2 s for a quarter: 6 s to go
    assert eta_text(5, None, 1.0) == "5"


# ---- item 11: mine uses the cores, same rules whatever their number ----------------------
def test_mine_defaults_to_the_cores_and_threads_do_not_change_the_rules(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert cli("load", "family", "--store", store, "--splits", "facts").exit_code == 0
    outputs = {}
    for threads in ("1", "2", "3", None):
        json_path = tmp_path / f"rules-{threads}.json"
        args = ["mine", "--store", store, "--json", str(json_path)]
        args += ["--threads", threads] if threads else []
        result = cli(*args)
        assert result.exit_code == 0, result.output
        outputs[threads] = result.stdout
        used = json.loads(json_path.read_text())
        assert used["meta"]["options"]["threads"] == (int(threads) if threads else available_cores())
    assert len(outputs[None].splitlines()) > 100  # Family facts: 145 rules at AMIE's defaults
    assert outputs["1"] == outputs["2"] == outputs["3"] == outputs[None]
    assert available_cores() == len(os.sched_getaffinity(0))
