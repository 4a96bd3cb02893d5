"""An evaluation never reports a wrong score silently: a rebuilt BRINK directory's KGs are
reloaded, a dead LLM endpoint fails the run (and a rerun asks those questions again), an
edited question file is asked again, duplicate ids and empty questions are refused, and
plots without matplotlib are skipped with one line. Each case failed before: wrong scores
with exit status 0."""

from __future__ import annotations

import importlib.util
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from fake_llm import Reply
from helpers.cli import run_cli as run
from helpers.toy_kg import MOVIES
from kgengine.oxigraph.store import OxigraphStore

DIRECTED = [t for t in MOVIES if t.relation == "directed_by"]


def write_build(folder: Path, removed: list[Any]) -> Path:
    """A BRINK-build-shaped folder: the complete KG, the incomplete one without ``removed``,
    and one test question per removed triple (who directed FILM)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kg_complete.tsv").write_text(
        "".join(f"{h}\t{r}\t{t}\n" for h, r, t in MOVIES), encoding="utf-8"
    )
    kept = [t for t in MOVIES if t not in removed]
    (folder / "kg_incomplete.tsv").write_text(
        "".join(f"{h}\t{r}\t{t}\n" for h, r, t in kept), encoding="utf-8"
    )
    questions = [
        {
            "id": f"q-{t.head}",
            "question": f"who directed [{t.head}]",
            "topic_entity": t.head,
            "answers": [t.tail],
            "hard_answer": t.tail,
        }
        for t in removed
    ]
    (folder / "questions_test.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8"
    )
    return folder


def eval_offline(build: Path, store: str, out: Path, plots: bool = False) -> Any:
    """``kgengine eval`` of a build with the offline method (no rules: the toy KG has none)."""
    return run("eval", "--questions", str(build), "--store", store, "--option", "use_rules=false",
               *([] if plots else ["--no-plots"]), "-o", str(out))


def test_a_rebuilt_build_directory_is_reloaded_not_reused(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    OxigraphStore(store).close()
    build = write_build(tmp_path / "fam", removed=DIRECTED[:1])
    first = eval_offline(build, store, str(tmp_path / "one"))
    assert first.exit_code == 0, first.output
    # the same folder rebuilt with other removals: the store's incomplete graph must follow
    write_build(build, removed=DIRECTED[1:3])
    second = eval_offline(build, store, str(tmp_path / "two"))
    assert second.exit_code == 0, second.output
    assert "does not hold this build's kg_incomplete.tsv" in second.output
    with OxigraphStore(store, read_only=True) as opened:
        held = set(opened.triples("fam-incomplete"))
    assert held == {t for t in MOVIES if t not in DIRECTED[1:3]}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_endpoint_fails_the_run_and_a_rerun_asks_again(tmp_path: Path, llm_server: Any) -> None:
    store = str(tmp_path / "store")
    with OxigraphStore(store) as opened:
        opened.load("movies", MOVIES, dataset="tsv")
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps(
            {
                "id": "q1",
                "question": "who directed [Heat]",
                "topic_entity": "Inception",
                "answers": ["Christopher Nolan"],
                "hard_answer": "Christopher Nolan",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    common = [
        "eval",
        "--questions",
        str(questions),
        "--method",
        "llm",
        "--graph",
        "movies",
        "--store",
        store,
        "--option",
        "llm_model=fake",
        "--option",
        "llm_cache=off",
        "--no-plots",
        "-o",
        str(out),
    ]
    dead = run(*common, "--option", f"llm_base_url=http://127.0.0.1:{closed_port()}/v1")
    # checked once before the first question: one line, at once
    assert dead.exit_code == 1 and "does not answer" in dead.output and "Traceback" not in dead.output
    failing = llm_server(lambda r: Reply("the model is not loaded", status=400))
    failed = run(*common, "--option", f"llm_base_url={failing.base_url}")
    assert failed.exit_code == 1 and "failed on a service" in failed.output
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    (record,) = [json.loads(line) for line in lines]
    assert record["service_failed"] and "LLM endpoint" in record["error"]
    server = llm_server(lambda r: "Christopher Nolan")
    fixed = run(*common, "--option", f"llm_base_url={server.base_url}")
    assert fixed.exit_code == 0, fixed.output
    assert len(server.requests) == 1  # the failed answer was asked again, not resumed
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (figures,) = summary["settings"].values()
    assert figures["hits_any"] == 1.0 and figures["errors"] == 0


def test_an_edited_question_file_is_asked_again(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    OxigraphStore(store).close()
    build = write_build(tmp_path / "fam", removed=DIRECTED[:2])
    out = tmp_path / "out"
    assert eval_offline(build, store, out).exit_code == 0
    path = build / "questions_test.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    records[0]["answers"], records[0]["hard_answer"] = ["nobody"], "nobody"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    again = eval_offline(build, store, out)
    assert again.exit_code == 0, again.output
    assert "asked again" in again.output
    results = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    latest = {r["id"]: r for r in results if r["graph_setting"] == "complete"}
    assert latest[records[0]["id"]]["gold"]["answers"] == ["nobody"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    complete = next(v for k, v in summary["settings"].items() if "/complete/" in k)
    assert complete["hits_any"] == 0.5  # the edited gold is scored, not the old one


def test_duplicate_ids_and_empty_questions_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    line = {"id": "q1", "question": "who directed [Heat]", "topic_entity": "Heat", "answers": ["Mann"]}
    path.write_text(
        json.dumps(line) + "\n" + json.dumps({**line, "question": "another"}) + "\n", encoding="utf-8"
    )
    store = str(tmp_path / "store")
    OxigraphStore(store).close()
    result = run("eval", "--questions", str(path), "--store", store, "--no-plots", "-o", str(tmp_path / "o"))
    assert result.exit_code == 1 and f"{path}:2" in result.output and "used twice (also at" in result.output
    result = run("ask", "--questions", str(path), "--store", store)
    assert result.exit_code == 1 and "used twice" in result.output
    path.write_text(json.dumps({**line, "question": "  "}) + "\n", encoding="utf-8")
    result = run("eval", "--questions", str(path), "--store", store, "--no-plots", "-o", str(tmp_path / "o"))
    assert result.exit_code == 1 and "empty question" in result.output and "Traceback" not in result.output


def test_plots_without_matplotlib_are_skipped_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a)
    )
    store = str(tmp_path / "store")
    OxigraphStore(store).close()
    build = write_build(tmp_path / "fam", removed=DIRECTED[:1])
    result = eval_offline(build, store, str(tmp_path / "out"), plots=True)
    assert result.exit_code == 0, result.output
    assert "plots skipped: they need matplotlib" in result.output
    assert not list((tmp_path / "out").rglob("*.png"))


def test_undecodable_files_are_one_line_in_eval_and_ask(tmp_path: Path) -> None:
    binary = tmp_path / "pred.json"
    binary.write_bytes(b'[{"id": 1}]\n\x89PNG\r\n\x1a\n\x00\xff')
    result = run("eval", "score", "--gold", str(binary), "--pred", str(binary))
    assert result.exit_code == 1 and f"{binary}:2: invalid UTF-8 (byte 0x89)" in result.output
    assert "Traceback" not in result.output
    store = str(tmp_path / "store")
    with OxigraphStore(store) as opened:
        opened.load("movies", MOVIES, dataset="tsv")
    for option in ("--questions", "--train"):
        args = ["ask", *(["who directed [Heat]"] if option == "--train" else []), option, str(binary),
                "--store", store, "--option", "use_rules=false"]
        result = run(*args)
        assert result.exit_code == 1 and "invalid UTF-8" in result.output, result.output
        assert "Traceback" not in result.output


def test_answering_without_the_conventional_training_split_is_said(tmp_path: Path) -> None:
    (tmp_path / "1-hop").mkdir()
    questions = tmp_path / "1-hop" / "qa_test.txt"
    questions.write_text("who directed [Inception]\tChristopher Nolan\n", encoding="utf-8")  # no qa_dev.txt
    store = str(tmp_path / "store")
    with OxigraphStore(store) as opened:
        opened.load("movies", MOVIES, dataset="tsv")
    result = run("eval", "--questions", str(questions), "--graph", "movies", "--store", store,
                 "--option", "use_rules=false", "--no-plots", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "no training split (qa_dev.txt of the same hop count by convention" in result.output
