"""``--labels`` means one thing in ``kgengine ask`` and ``kgengine eval``: the same option (name,
choices, help, default: as given), the surface form of the entities the answerer sees and
writes; a form the graph or the BRINK build does not have is an error in one line, never ids
printed in its place."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from helpers.cli import run_parts
from kgengine.commands.ask import ask
from kgengine.commands.eval import eval_group
from kgengine.model import Triple
from kgengine.oxigraph.store import OxigraphStore

COUPLES = [t for i in range(60)
           for t in (Triple(f"h{i}", "husband", f"w{i}"), Triple(f"w{i}", "wife", f"h{i}"))]
NAMES = [(f"h{i}", f"Harry {i}") for i in range(60)] + [(f"w{i}", f"Wendy {i}") for i in range(60)]
# the inversion pair, in AMIE 3's TSV: every husband triple is re-derivable from its wife twin
RULES = ("body\thead\tsupport\thc\tstd_conf\tpca_conf\tbody_size\tpca_body_size\tn_body_atoms\t"
         "functional_variable\n"
         "husband(?b,?a)\twife(?a,?b)\t60\t1\t1\t1\t60\t60\t1\t?a\n"
         "wife(?b,?a)\thusband(?a,?b)\t60\t1\t1\t1\t60\t60\t1\t?a\n")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the same couples twice, with text labels (``named``) and without
    (``plain``), and a BRINK build of each (``named-build`` in private ids with labels in its
    entities.tsv; ``plain-build`` loaded as ``plain-brink-*``, private ids only)."""
    root = tmp_path_factory.mktemp("labels")
    with OxigraphStore(str(root / "store")) as store:
        store.load("named", COUPLES, dataset="couples", labels=NAMES)
        store.load("plain", COUPLES, dataset="couples")
    (root / "rules.tsv").write_text(RULES, encoding="utf-8")
    for graph, extra in (("named", []), ("plain", ["--load"])):
        code, _, err = run(root, "brink", "build", "--graph", graph, "--rules", str(root / "rules.tsv"),
                           "-o", str(root / f"{graph}-build"), *extra)
        assert code == 0, err
    return root


def run(root: Path, *args: str) -> tuple[int, str, str]:
    return run_parts(*args, "--store", str(root / "store"), env={"KGENGINE_CACHE": str(root / "cache")})


def labels_param(command: click.Command) -> click.Option:
    return next(p for p in command.params if isinstance(p, click.Option) and "--labels" in p.opts)


def assert_one_line_error(code: int, out: str, err: str, *expected: str) -> None:
    assert code != 0
    assert out == ""  # nothing printed in another form instead
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in lines[0], lines[0]


def test_ask_and_eval_share_one_option() -> None:
    ours, theirs = labels_param(ask), labels_param(eval_group)
    assert ours.opts == theirs.opts == ["--labels"]
    assert isinstance(ours.type, click.Choice) and isinstance(theirs.type, click.Choice)
    assert list(ours.type.choices) == list(theirs.type.choices) == ["private", "dataset", "text"]
    assert ours.help == theirs.help and "error" in (ours.help or "")
    assert ours.default is None and theirs.default is None  # both: as given


def test_ask_writes_the_form_asked_for(work: Path) -> None:
    question = ["ask", "Who is the husband of [w3]?", "--graph", "named", "--json"]
    raw = {}
    for form in (None, "dataset", "text", "private"):
        code, out, err = run(work, *question, *(["--labels", form] if form else []))
        assert code == 0, err
        raw[form] = json.loads(out)["raw_output"]
    assert raw[None] == raw["dataset"] == "h3"  # the default: the graph's own ids
    assert raw["text"] == "Harry 3"
    with OxigraphStore(str(work / "store"), read_only=True) as store:
        assert raw["private"] == store.private_ids("named")["h3"]


@pytest.mark.parametrize("graph", ["plain", "plain-brink-incomplete"])
def test_ask_refuses_text_labels_a_graph_lacks(work: Path, graph: str) -> None:
    """Family-like ids-only graphs and a BRINK build's KG in private ids: ``--labels text``
    would print the ids as if they were labels."""
    code, out, err = run(work, "ask", "Who is the husband of [w3]?", "--graph", graph, "--labels", "text")
    assert_one_line_error(code, out, err, "--labels text", f"graph {graph!r} has no text labels")


def test_ask_refuses_text_labels_through_option_too(work: Path) -> None:
    code, out, err = run(work, "ask", "Who is the husband of [w3]?", "--graph", "plain",
                         "--option", "labels=text")
    assert_one_line_error(code, out, err, "has no text labels")


def test_eval_refuses_text_labels_a_build_lacks(work: Path) -> None:
    code, out, err = run(work, "eval", "--questions", str(work / "plain-build"), "--labels", "text",
                         "-o", str(work / "eval-plain-text"))
    assert_one_line_error(code, out, err, "--labels text", "has no text labels")
    assert not (work / "eval-plain-text").exists()  # refused before anything was written


def test_eval_writes_the_form_asked_for(work: Path) -> None:
    out_dir = work / "eval-named-text"
    code, out, err = run(work, "eval", "--questions", str(work / "named-build"), "--labels", "text",
                         "-o", str(out_dir))
    assert code == 0, err
    records = [json.loads(line) for line in (out_dir / "results.jsonl").read_text().splitlines()]
    assert records and all(r["topic_entity"].startswith(("Harry ", "Wendy ")) for r in records)
    assert all(a.startswith(("Harry ", "Wendy ")) for r in records for a in r["gold"]["answers"])
