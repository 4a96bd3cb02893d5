"""``kgengine ask`` end to end: one question (table and --json), a BRINK-schema JSONL batch, a
MetaQA batch learned from a MetaQA training file, and the errors a user can make."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run_parts as run
from helpers.toy_kg import triples
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore

MOVIES = [*triples("""
Heat | directed_by | Michael Mann
Collateral | directed_by | Michael Mann
Alien | directed_by | Ridley Scott
Heat | starred_actors | Al Pacino
Collateral | starred_actors | Tom Cruise
Alien | starred_actors | Sigourney Weaver
Heat | release_year | 1995
Collateral | release_year | 2004
Alien | release_year | 1979
"""),
]


@pytest.fixture
def ask_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Graphs 'company' (managers and reports, one `manages` fact left out) and 'movies'."""
    monkeypatch.setenv("KGENGINE_CACHE", str(tmp_path / "cache"))
    location = str(tmp_path / "store")
    with OxigraphStore(location) as store:
        company = []
        for j in range(150):
            company += [Triple(f"m{j // 5}", "manages", f"p{j}"), Triple(f"p{j}", "reports_to", f"m{j // 5}")]
        store.load("company", [t for t in company if t != Triple("m3", "manages", "p17")], dataset="company")
        names = [(e, e) for t in MOVIES for e in (t.head, t.tail)]
        store.load("movies", MOVIES, dataset="metaqa", labels=names)
    return location


def test_ask_json(ask_store: str) -> None:
    code, out, err = run("ask", "Who does m3 manage?", "--graph", "company", "--store", ask_store, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert set(answer) >= {"question", "topic_entity", "method", "answers", "relation_path", "learned_from",
                           "timings"}
    assert answer["topic_entity"] == "m3" and answer["method"] == "offline"
    assert answer["relation_path"] == ["manages"] and answer["learned_from"] == "zero-shot"
    assert [a["id"] for a in answer["answers"]] == ["p15", "p16", "p18", "p19", "p17"]
    assert answer["answers"][-1]["evidence"] == [
        {"path": [["p17", "reports_to", "m3"]], "rule": "reports_to(?b,?a) => manages(?a,?b)",
         "confidence": 1.0}]
    assert answer["raw_output"] == "p15, p16, p18, p19, p17"
    assert "mined on 'company' on first use" in err  # said on stderr, JSON stays clean


def test_ask_renders_answers_path_and_evidence(ask_store: str) -> None:
    code, out, _ = run("ask", "Who does m3 manage?", "--graph", "company", "--store", ask_store,
                       "--entity", "m3")
    assert code == 0
    assert "relation path:" in out and "manages" in out
    assert "reports_to(p17, m3)" in out and "reports_to(?b,?a) => manages(?a,?b)" in out
    assert "reasoning:" in out


def test_ask_questions_jsonl_batch(ask_store: str, tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    records = [{"id": "a", "question": "Who does m3 manage?", "topic_entity": "m3", "answers": ["x"]},
               {"id": 7, "question": "Who does p17 report to?", "topic_entity": "p17"},
               {"id": "c", "question": "Who does zz9 manage?", "topic_entity": "zz9"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    code, out, err = run("ask", "--questions", str(path), "--graph", "company", "--store", ask_store)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in lines] == ["a", 7, "c"]
    assert lines[0]["raw_output"] == "p15, p16, p18, p19, p17"
    assert lines[1]["raw_output"] == "m3"
    assert lines[2]["answers"] == [] and "no entity 'zz9'" in lines[2]["error"]


def test_ask_metaqa_batch_learned_from_a_training_file(ask_store: str, tmp_path: Path) -> None:
    hop = tmp_path / "metaqa" / "1-hop"
    hop.mkdir(parents=True)
    (hop / "qa_dev.txt").write_text(
        "what movies did [Michael Mann] direct\tHeat|Collateral\n"
        "what movies did [Ridley Scott] direct\tAlien\n"
        "when was [Heat] released\t1995\n"
        "when was [Alien] released\t1979\n", encoding="utf-8")
    (hop / "qa_test.txt").write_text(
        "what movies did [Ridley Scott] direct\tNOT READ\n"
        "when was [Collateral] released\tNOT READ\n"
        "which films did [Michael Mann] direct\tNOT READ\n", encoding="utf-8")
    code, out, err = run("ask", "--questions", str(hop / "qa_test.txt"), "--graph", "movies",
                         "--store", ask_store, "--train", str(hop / "qa_dev.txt"),
                         "--option", "use_rules=false")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in lines] == ["1", "2", "3"]
    assert [r["relation_path"] for r in lines] == [["^directed_by"], ["release_year"], ["^directed_by"]]
    assert [r["learned_from"] for r in lines] == ["train", "train", "nearest-pattern"]
    assert [r["raw_output"] for r in lines] == ["Alien", "2004", "Collateral, Heat"]
    assert "2 patterns learned from 4 training questions" in err


def test_ask_errors(ask_store: str) -> None:
    code, _, err = run("ask", "Who does m33 manage?", "--entity", "m33", "--graph", "company",
                       "--store", ask_store)
    assert code == 1 and "no entity 'm33' in graph 'company'" in err and "close matches: 'm3'" in err
    code, _, err = run("ask", "Who does m3 manage?", "--graph", "nope", "--store", ask_store)
    assert code == 1 and "no graph 'nope'" in err
    code, _, err = run("ask", "--graph", "company", "--store", ask_store)
    assert code == 2 and "give a QUESTION or --questions FILE" in err
    code, _, err = run("ask", "x", "--graph", "company", "--store", ask_store, "--method", "psychic")
    assert code == 2


@pytest.mark.slow  # loads the real embedding model and embeds the graph
def test_ask_llm_kg_through_the_cli_against_a_local_server(ask_store: str, tmp_path: Path, llm_server,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_llm import replies

    for name in ("KGENGINE_LLM_MODEL", "KGENGINE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "no-config.toml"))
    server = llm_server(replies("Answer: Tom Cruise"))
    code, out, err = run("ask", "who starred in [Collateral]", "--graph", "movies", "--store", ask_store,
                         "--method", "llm-kg", "--hops", "1", "--top-k", "3", "--llm-base-url",
                         server.base_url, "--llm-model", "fake-model", "--llm-cache", str(tmp_path / "llm"),
                         "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["method"] == "llm-kg" and answer["topic_entity"] == "Collateral"
    assert answer["raw_output"] == "Tom Cruise" and answer["answers"][0]["id"] == "Tom Cruise"
    (request,) = server.requests
    assert request.model == "fake-model" and "(Collateral, starred actors, Tom Cruise)" in request.prompt
    # without a model (and no packaged local model to start) an LLM method says what is missing
    monkeypatch.setattr("kgengine.llm.local.local_llm_available", lambda: False)
    code, _, err = run("ask", "who starred in [Collateral]", "--graph", "movies", "--store", ask_store,
                       "--method", "llm")
    assert code == 1 and "no LLM model configured" in err


def test_ask_prints_the_llm_methods_total_time(ask_store: str, tmp_path: Path, llm_server,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Every method's timings are in ms: the plain rendering's last line is the total, which
    for an LLM method includes the server's reply time (it printed 0.0 ms while LLM methods
    recorded seconds)."""
    from fake_llm import Reply, replies

    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "no-config.toml"))
    server = llm_server(replies(Reply("Answer: Michael Mann", delay=0.2)))
    code, out, err = run("ask", "who directed [Heat]", "--graph", "movies", "--store", ask_store,
                         "--method", "llm", "--llm-base-url", server.base_url, "--llm-model", "fake-model",
                         "--llm-cache", str(tmp_path / "llm"))
    assert code == 0, err
    assert "Michael Mann" in out
    total = float(out.strip().splitlines()[-1].removesuffix(" ms"))
    assert total >= 200.0


def test_ask_refuses_an_empty_questions_file_and_an_endpoint_without_a_model(
        ask_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    code, _, err = run("ask", "--questions", str(empty), "--graph", "company", "--store", ask_store)
    assert code == 1 and f"{empty} holds no questions" in err
    code, out, err = run("ask", "--questions", str(empty), "--graph", "company", "--store", ask_store,
                         "--allow-empty")
    assert code == 0 and out == "" and "holds no questions" in err
    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.delenv("KGENGINE_LLM_MODEL", raising=False)
    # an endpoint on the command line means an LLM method: never a silent offline answer
    code, _, err = run("ask", "Who does m3 manage?", "--graph", "company", "--store", ask_store,
                       "--llm-base-url", "http://127.0.0.1:9/v1")
    assert code == 1 and "no LLM model configured" in err
