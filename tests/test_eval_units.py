"""Question sets, protocols, resumable results, miss causes and `kgengine eval score` errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from kgengine.cli import main
from kgengine.errors import InputError, KGEngineError
from kgengine.eval.analysis import (
    KB_LACKS_FACT,
    NO_RULE_REACHES_HARD,
    RANKED_BELOW_CUT,
    RELATION_NOT_LINKED,
    TOPIC_NOT_LINKED,
    WRONG_ANSWER,
    miss_cause,
)
from kgengine.eval.ceiling import adjacency, answerable, within_hops
from kgengine.eval.protocols import (
    Setting,
    expand,
    heldout_patterns,
    parse_graph_settings,
    parse_int_list,
    sample,
)
from kgengine.eval.runner import ResultLog, run_plan
from kgengine.model import Question
from kgengine.questions import grounding_head, load_question_set, read_brink_jsonl, read_official_tsv
from kgengine.rag.base import Answer, ScoredAnswer


# ---- question sets ----------------------------------------------------------------------------
def test_metaqa_names_find_the_shared_copy(datasets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGENGINE_DATA", str(datasets_dir))
    qset = load_question_set("metaqa-2hop:dev")
    lines = (datasets_dir / "metaqa" / "2-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    assert len(qset.questions) == len(lines)
    first = qset.questions[0]
    text, answers = lines[0].split("\t")
    assert first.question.text == text and first.answers == tuple(answers.split("|"))
    assert first.question.topic_entity == text[text.index("[") + 1 : text.index("]")]
    assert first.hops == 2 and first.pattern  # qtype read from qa_dev_qtype.txt
    assert load_question_set("metaqa-1hop").train.name == "qa_dev.txt"  # test learns from dev


def write_official_tsv(path: Path, rows: list[dict]) -> None:
    # as the official question_generation.py writes it: csv.DictWriter, lists via str()
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(
            fh,
            fieldnames=[
                "id",
                "rule_index",
                "question",
                "q_entity",
                "answer",
                "a_entity",
                "rule",
                "grounding",
            ],
            delimiter="\t",
        )
        writer.writeheader()
        writer.writerows(rows)


def test_official_tsv_questions(tmp_path: Path) -> None:
    path = tmp_path / "test.tsv"
    write_official_tsv(
        path,
        [
            {
                "id": 7,
                "rule_index": 3,
                "question": "Who is the sister of 12?",
                "q_entity": ["12"],
                "answer": ["40", "41"],
                "a_entity": ["40", "41"],
                "rule": ["?b brother ?a => ?a sister ?b"],
                "grounding": ["41 brother 12 => 12 sister 41"],
            },
            {
                "id": 8,
                "rule_index": 3,
                "question": "Whose sister is 41?",
                "q_entity": ["41"],
                "answer": ["12"],
                "a_entity": ["12"],
                "rule": [],
                "grounding": ["41 brother 12 => 12 sister 41"],
            },
        ],
    )
    first, second = read_official_tsv(path)
    assert first.id == "7" and first.question == Question("Who is the sister of 12?", "12")
    assert first.answers == ("40", "41") and first.hard_answer == "41"  # from the grounding's head
    assert second.hard_answer == "12" and second.rule is None  # topic is the head's tail
    assert grounding_head("a r b | b s c => a t c") == ("a", "t", "c")
    assert load_question_set(str(path)).kind.metric == "brink"


def test_official_tsv_bad_cells_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    write_official_tsv(
        path,
        [{"id": 1, "rule_index": 0, "question": "q", "q_entity": "['x'", "answer": [], "a_entity": [],
          "rule": [], "grounding": []}],
    )
    with pytest.raises(InputError, match=r"bad\.tsv:2: column 'q_entity'"):
        read_official_tsv(path)
    (tmp_path / "cols.tsv").write_text("id\tquestion\n1\tq\n")
    with pytest.raises(InputError, match="missing column"):
        read_official_tsv(tmp_path / "cols.tsv")


def test_brink_jsonl_reads_only_what_it_needs_and_names_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "q1",
                "question": "Who is the son of e1?",
                "topic_entity": "e1",
                "answers": ["e2", "e3"],
                "hard_answer": "e3",
                "relation": "son",
                "direction": "forward",
                "rule_type": "inversion",
                "paths": [],
            }
        )
        + "\n"
        + '{"id": "q2", "question": "x"}\n'
    )
    with pytest.raises(InputError, match=r"q\.jsonl:2: missing 'answers'"):
        read_brink_jsonl(path)
    path.write_text(path.read_text().splitlines()[0] + "\n")
    (q,) = read_brink_jsonl(path)
    assert q.question == Question("Who is the son of e1?", "e1")  # nothing else reaches an answerer
    assert (q.hard_answer, q.pattern, q.rule_type) == ("e3", "son/forward", "inversion")


def test_unknown_question_spec_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KGEngineError, match="not a MetaQA name"):
        load_question_set(str(tmp_path / "nope"))


def test_within_hops_and_the_answerable_ceiling() -> None:
    graph = adjacency([("a", "r", "b"), ("b", "r", "c"), ("c", "s", "d")])
    assert within_hops(graph, "a", 1) == {"b"}
    assert within_hops(graph, "a", 2) == {"a", "b", "c"}  # back to a through b
    assert within_hops(graph, "a", 3) == {"a", "b", "c", "d"}
    from kgengine.questions import QuestionRecord

    qs = [
        QuestionRecord("1", Question("?", "a"), ("c",), hops=1),
        QuestionRecord("2", Question("?", "a"), ("c",), hops=2),
        QuestionRecord("3", Question("?", "zz"), ("c",), hops=3),
    ]
    assert answerable(qs, graph) == [False, True, False]


# ---- protocols --------------------------------------------------------------------------------
def test_int_lists_and_ranges() -> None:
    assert parse_int_list("0-7", "--seeds") == list(range(8))
    assert parse_int_list("10,20,30", "--top-k") == [10, 20, 30]
    assert parse_int_list("1,1-2", "--hops") == [1, 2]
    assert parse_int_list(None, "--hops") == [None]
    with pytest.raises(KGEngineError, match="--seeds '7-3'"):
        parse_int_list("7-3", "--seeds")


def test_seeded_samples_are_reproducible_ordered_and_differ_by_seed() -> None:
    items = list(range(100))
    a, b = sample(items, 10, 0), sample(items, 10, 1)
    assert a == sample(items, 10, 0) and a == sorted(a) and len(set(a)) == 10 and a != b
    assert sample(items, 500, 3) == items


def test_graph_settings_and_expansion() -> None:
    graphs = parse_graph_settings(["complete=G1", "incomplete=G2"])
    assert [(g.name, g.graph) for g in graphs] == [("complete", "G1"), ("incomplete", "G2")]
    assert parse_graph_settings(["metaqa"])[0].name == "metaqa"
    with pytest.raises(KGEngineError, match="given twice"):
        parse_graph_settings(["x=a", "x=b"])
    settings = expand(["qs"], graphs, ["offline"], [1, 2], [10], {"qs": None})
    assert [s.key for s in settings] == [
        "qs/complete/offline/hops=1/k=10",
        "qs/complete/offline/hops=2/k=10",
        "qs/incomplete/offline/hops=1/k=10",
        "qs/incomplete/offline/hops=2/k=10",
    ]


def test_heldout_patterns_seeded_share() -> None:
    patterns = [f"p{i}" for i in range(8)] * 3
    held = heldout_patterns(patterns, 0.25, 0)
    assert len(held) == 2 and held == heldout_patterns(patterns, 0.25, 0)
    assert heldout_patterns(["a", "b"], 0.9, 0) in ({"a"}, {"b"})  # never all of them
    with pytest.raises(KGEngineError):
        heldout_patterns(["a"], 0.5, 0)


# ---- resumable results ------------------------------------------------------------------------
class CountingAnswerer:
    """Answers "x -> y" questions from a dict (topic -> answers); counts its calls."""

    method = "lookup"

    def __init__(self, facts: dict[str, list[str]]) -> None:
        self.facts, self.calls = facts, 0

    def answer(self, question: Question) -> Answer:
        self.calls += 1
        if question.topic_entity not in self.facts:
            raise KGEngineError(f"cannot link {question.topic_entity}")
        found = self.facts[question.topic_entity]
        return Answer(
            question.text,
            question.topic_entity,
            self.method,
            [ScoredAnswer(a, 1.0) for a in found],
            relation_path=["r"],
            raw_output=", ".join(found),
        )


def test_result_log_resumes_and_repairs_a_torn_line(tmp_path: Path) -> None:
    from kgengine.questions import QuestionRecord

    qs = [
        QuestionRecord(f"q{i}", Question(f"q{i}?", f"e{i}"), (f"a{i}",), hard_answer=f"a{i}")
        for i in range(5)
    ]
    setting = Setting("qs", "g", "g", "lookup")
    answerer = CountingAnswerer({f"e{i}": [f"a{i}"] for i in range(4)})  # e4 cannot be linked
    log_path = tmp_path / "results.jsonl"
    first = run_plan([(setting, qs[:3])], lambda s: answerer, ResultLog(log_path))
    assert answerer.calls == 3 and len(first[setting.key]) == 3
    with log_path.open("a") as fh:
        fh.write('{"id": "q3", "setting": "qs/g/look')  # a write cut off by a kill
    out = run_plan([(setting, qs)], lambda s: answerer, ResultLog(log_path))
    assert answerer.calls == 5  # only q3 and q4 answered again
    records = out[setting.key]
    assert [r["id"] for r in records] == [q.id for q in qs]
    assert records[4]["error"] == "cannot link e4" and records[4]["raw_output"] == ""
    lines = log_path.read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line) for line in lines)
    # another graph under the same setting name is not a result of this one
    moved = Setting("qs", "g", "other-graph", "lookup")
    assert ResultLog(log_path).done(moved, "q0") is None


# ---- miss causes ------------------------------------------------------------------------------
def record(**over: object) -> dict:
    base = {
        "topic_entity": "e1",
        "linked_topic": "e1",
        "relation_path": ["son"],
        "answers": ["e5"],
        "answer_labels": [None],
        "raw_output": "e5",
        "top_answer": "e5",
        "gold": {"answers": ["e2", "e3"], "hard_answer": "e3", "pattern": "son/forward"},
    }
    return base | over


def test_miss_causes_in_order() -> None:
    assert (
        miss_cause(record(linked_topic=None), metaqa=False, reachable=None, has_fact=None) == TOPIC_NOT_LINKED
    )
    assert (
        miss_cause(record(relation_path=None, answers=[]), metaqa=False, reachable=None, has_fact=None)
        == RELATION_NOT_LINKED
    )
    assert (
        miss_cause(record(relation_path=["^son"]), metaqa=False, reachable=None, has_fact=None)
        == RELATION_NOT_LINKED
    )  # not the asked relation
    assert (
        miss_cause(record(answers=["e5", "e3"]), metaqa=False, reachable=None, has_fact=None)
        == RANKED_BELOW_CUT
    )
    assert miss_cause(record(), metaqa=False, reachable={"e5"}, has_fact=False) == KB_LACKS_FACT
    assert miss_cause(record(), metaqa=False, reachable={"e3", "e5"}, has_fact=False) == NO_RULE_REACHES_HARD
    assert miss_cause(record(), metaqa=False, reachable={"e3", "e5"}, has_fact=True) == WRONG_ANSWER
    metaqa = record(gold={"answers": ["e3"], "hard_answer": None}, answers=["e5", "e3"])
    assert miss_cause(metaqa, metaqa=True, reachable={"e3"}, has_fact=None) == RANKED_BELOW_CUT


# ---- eval score errors ------------------------------------------------------------------------
def test_score_cli_errors_name_the_file_and_record(tmp_path: Path) -> None:
    gold, pred = tmp_path / "gold.json", tmp_path / "pred.json"
    gold.write_text(json.dumps([{"id": "q1", "answers": ["x"], "hard_answer": "x"}, {"id": "q2"}]))
    pred.write_text("[]")
    result = CliRunner().invoke(main, ["eval", "score", "--gold", str(gold), "--pred", str(pred)])
    assert result.exit_code != 0 and f"{gold}: record 1: missing 'answers'" in result.output
    gold.write_text("[\n{]")
    result = CliRunner().invoke(main, ["eval", "score", "--gold", str(gold), "--pred", str(pred)])
    assert result.exit_code != 0 and f"{gold}:2: not valid JSON" in result.output


def test_score_cli_plain_and_permissive(tmp_path: Path) -> None:
    gold, pred = tmp_path / "gold.json", tmp_path / "pred.json"
    gold.write_text(
        json.dumps(
            [
                {"id": 1, "answers": ["Barack Obama"], "hard_answer": "Barack Obama"},
                {"id": 2, "answers": ["Paris"], "hard_answer": "Paris"},
            ]
        )
    )
    pred.write_text(
        json.dumps([{"id": 1, "raw_output": "not Barack Obama"}, {"id": 2, "raw_output": "paris"}])
    )
    result = CliRunner().invoke(
        main, ["eval", "score", "--gold", str(gold), "--pred", str(pred), "--json", "--permissive"]
    )
    out = json.loads(result.output)
    assert out["hits_any"] == 0.5 and out["permissive"]["hits_any"] == 1.0 and out["n"] == 2
    text = CliRunner().invoke(
        main, ["eval", "score", "--gold", str(gold), "--pred", str(pred), "--permissive"]
    )
    assert "PERMISSIVE" in text.output and "hits_any   0.5000" in text.output


def test_metaqa_question_types_read_as_relation_paths() -> None:
    from kgengine.eval.analysis import metaqa_path

    assert metaqa_path("movie_to_director") == ["directed_by"]
    assert metaqa_path("actor_to_movie_to_writer") == ["^starred_actors", "written_by"]
    assert metaqa_path("movie_to_writer_to_movie_to_year") == ["written_by", "^written_by", "release_year"]
    assert metaqa_path("tag_to_movie") == ["^has_tags"]
    assert metaqa_path("director_to_actor") is None and metaqa_path(None) is None
    wrong = record(
        relation_path=["starred_actors"],
        gold={"answers": ["Rob"], "hard_answer": None, "pattern": "movie_to_director"},
    )
    assert miss_cause(wrong, metaqa=True, reachable={"Rob"}, has_fact=None) == RELATION_NOT_LINKED


def test_labels_the_official_splitting_cannot_match() -> None:
    from kgengine.eval.surface import ambiguous_labels

    report = ambiguous_labels(["Paris, Texas", "The Beatles", "beatles", "Beatles!", "Oslo"])
    assert report["with_comma"] == 1 and report["with_comma_examples"] == ["Paris, Texas"]
    # "The Beatles", "beatles" and "Beatles!" all normalise to "beatles"
    assert report["colliding_groups"] == 1 and report["colliding_entities"] == 3


def test_reexpressing_a_question_moves_topic_text_and_gold(tmp_path: Path) -> None:
    from kgengine.eval.surface import BuildEntity, reexpress, surface_map
    from kgengine.questions import QuestionRecord

    entities = [BuildEntity("e1", "m1", "Ann"), BuildEntity("e10", "m10", "Bob")]
    mapping = surface_map(entities, "private", "text")
    q = QuestionRecord("q", Question("Who is the son of e1?", "e1"), ("e10",), hard_answer="e10")
    moved = reexpress(q, mapping)
    assert moved.question == Question("Who is the son of Ann?", "Ann")
    assert (moved.answers, moved.hard_answer) == (("Bob",), "Bob")
    # whole tokens only: e1 inside e10 is not replaced
    assert (
        reexpress(QuestionRecord("q", Question("e10 and e1?", "e1"), ()), mapping).question.text
        == "e10 and Ann?"
    )
