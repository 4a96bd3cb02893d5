"""Every LLM method the registry has (the KG-RAG paper's four, Think-on-Graph, planning, and
any registered later) run end to end against a real model: the packaged SmolLM2-135M served
by ``kgengine llm serve`` (tests/local_llm.py), on a few MetaQA and BRINK Family questions,
through ``ask`` and ``eval``. What must hold with any model: no error records, every prompt
within the context budget, replies parsed into graph entities or free text (never a
fragment of a copied fact), the second run served from the cache, timings recorded. What the
model answers is not asserted: a 135M model answers poorly (the figures are in bench/llm.py)."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner
from kgengine.cli import main
from kgengine.llm import LLMRequest, LLMStats, OpenAICompatibleLLM, request_tokens_of
from kgengine.loaders import read_dataset
from kgengine.model import Question
from kgengine.oxigraph.store import OxigraphStore
from kgengine.rag.base import answer_or_error
from kgengine.rag.methods import (
    AnswerSettings,
    MethodContext,
    Need,
    build_answerer,
    method_names,
    method_spec,
)

if TYPE_CHECKING:
    from local_llm import RunningLLM

pytest_plugins = ["local_llm"]
pytestmark = [pytest.mark.llm_local, pytest.mark.slow]

LLM_METHODS = [m for m in method_names() if Need.LLM in method_spec(m).needs]
METAQA_QUESTIONS = ["what movies did [Christopher Nolan] direct", "who directed [Inception]"]


class Recording:
    """An LLM that passes every request to the real client and keeps it with its size; it
    passes on the client's capabilities (kgengine.llm.protocol) too."""

    def __init__(self, llm: OpenAICompatibleLLM) -> None:
        self.llm = llm
        self.sent: list[tuple[LLMRequest, int]] = []

    @property
    def context_length(self) -> int | None:
        return self.llm.context_length

    def count_tokens(self, text: str) -> int:
        return self.llm.count_tokens(text)

    def track_usage(self) -> AbstractContextManager[LLMStats]:
        return self.llm.track_usage()

    def complete(self, request: LLMRequest) -> str:
        self.sent.append((request, request_tokens_of(self.llm, request)))
        return self.llm.complete(request)


@pytest.fixture(scope="module")
def metaqa_store(datasets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = OxigraphStore(str(tmp_path_factory.mktemp("real-llm") / "store"))
    data = read_dataset("metaqa", datasets_dir / "metaqa")
    store.load("metaqa", data.triples, dataset="metaqa", labels=data.labels)
    yield store
    store.close()


@pytest.mark.parametrize("method", LLM_METHODS)
def test_every_llm_method_answers_within_the_context_and_from_the_cache_again(
    method: str, metaqa_store: Any, local_llm: RunningLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entities = {e for t in metaqa_store.triples("metaqa") for e in (t.head, t.tail)}
    cache = tmp_path / "llm-cache"
    for run in ("first", "second"):
        llm = Recording(OpenAICompatibleLLM(**local_llm.client_options(), cache_dir=cache))
        monkeypatch.setattr(MethodContext, "llm", lambda self, llm=llm: llm)
        settings = AnswerSettings(hops=2, top_k=10, cache_dir=tmp_path / "cache")
        answerer = build_answerer(metaqa_store, "metaqa", method, settings)
        for text in METAQA_QUESTIONS:
            answer = answer_or_error(answerer, Question(text))
            assert answer.error is None, f"{method}: {answer.error}"
            assert answer.timings["total_ms"] > 0
            for scored in answer.answers:
                if scored.score > 0:  # mapped to the graph: an entity of it
                    assert scored.id in entities
                assert not scored.id.startswith("(")  # never a fragment of a copied fact
        assert llm.sent, f"{method} sent nothing"
        for request, tokens in llm.sent:
            assert tokens + (request.max_tokens or 0) <= local_llm.context_length, request.prompt[:200]
        stats = llm.llm.stats
        if run == "first":
            assert stats.requests > 0 and stats.prompt_tokens > 0
        else:  # temperature 0, the same prompts: every reply from the cache
            assert stats.requests == 0 and stats.cache_hits == len(llm.sent)


@pytest.fixture(scope="module")
def family_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("real-llm-family")
    store, out = root / "store", root / "fam"
    runner = CliRunner()
    result = runner.invoke(main, ["load", "family", "--splits", "facts", "--graph", "family-facts",
                                  "--store", str(store)])
    assert result.exit_code == 0, result.output
    rules = Path(__file__).resolve().parent.parent / "engine" / "brink" / "data" / "family_amie3_len3.tsv"
    result = runner.invoke(
        main,
        [
            "brink",
            "build",
            "--graph",
            "family-facts",
            "--store",
            str(store),
            "--rules",
            str(rules),
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return store, out


def test_every_llm_method_through_ask_and_eval(
    family_build: tuple[Path, Path], local_llm: RunningLLM, tmp_path: Path
) -> None:
    store, build = family_build
    endpoint = ["--llm-base-url", local_llm.base_url, "--llm-model", local_llm.model]
    first = json.loads((build / "questions_test.jsonl").read_text(encoding="utf-8").splitlines()[0])
    questions = tmp_path / "one.jsonl"
    questions.write_text(
        json.dumps({"id": first["id"], "question": first["question"], "topic_entity": first["topic_entity"]})
        + "\n",
        encoding="utf-8",
    )
    runner = CliRunner()
    for method in LLM_METHODS:
        result = runner.invoke(
            main,
            [
                "ask",
                "--questions",
                str(questions),
                "--method",
                method,
                "--store",
                str(store),
                "--graph",
                "family-facts",
                *endpoint,
                "--llm-cache",
                str(tmp_path / "ask-cache"),
            ],
        )
        assert result.exit_code == 0, result.output
        (record,) = [json.loads(line) for line in result.stdout.splitlines()]
        assert "error" not in record, record.get("error")
        assert record["method"] == method and record["timings"]["total_ms"] > 0
    out = tmp_path / "eval"
    args = [
        "eval",
        "--questions",
        str(build),
        "--method",
        ",".join(LLM_METHODS),
        "--sample",
        "1",
        "--store",
        str(store),
        "--no-plots",
        "--option",
        f"llm_base_url={local_llm.base_url}",
        "--option",
        f"llm_model={local_llm.model}",
        "--option",
        f"llm_cache={tmp_path / 'eval-cache'}",
        "-o",
        str(out),
    ]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert {key.split("/")[2] for key in summary["settings"]} == set(LLM_METHODS)
    for key, figures in summary["settings"].items():
        assert figures["errors"] == 0, key
        assert figures["n"] == 1
    records = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(r["error"] is None for r in records)
