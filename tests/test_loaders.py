"""Dataset readers on the real files (no store): every figure is checked against a count
made here with plain Python from the raw files, and against the documented figure."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kgengine.errors import InputError, KGEngineError
from kgengine.loaders import LOADERS, base, read_dataset
from kgengine.loaders.base import DelimitedTriples, NamesFile
from kgengine.loaders.metaqa import MetaQAQuestion, load_questions, parse_question, read_questions
from kgengine.model import Triple
from load_helpers import raw_triples, write_wikidata5m

# ---- the block reader ---------------------------------------------------------------------------
_field = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\t\n\r|"),
    min_size=1, max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(_field, _field, _field), max_size=40),
    crlf=st.booleans(),
    final_newline=st.booleans(),
    blank_every=st.integers(min_value=0, max_value=5),
    sep=st.sampled_from(["\t", "|"]),
    block_bytes=st.integers(min_value=1, max_value=64),
)
def test_block_reader_returns_every_triple_in_order(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, str, str]], crlf: bool,
    final_newline: bool, blank_every: int, sep: str, block_bytes: int,
) -> None:
    eol = "\r\n" if crlf else "\n"
    lines = []
    for i, row in enumerate(rows):
        if blank_every and i % blank_every == 0:
            lines.append("")
        lines.append(sep.join(row))
    text = eol.join(lines) + (eol if final_newline and lines else "")
    path = tmp_path_factory.mktemp("blocks") / "kg.txt"
    path.write_bytes(text.encode("utf-8"))
    original = base.BLOCK_BYTES
    base.BLOCK_BYTES = block_bytes  # tiny blocks: lines cut across reads
    try:
        got = list(DelimitedTriples((path,), separator=sep))
    finally:
        base.BLOCK_BYTES = original
    # a line of only whitespace counts as blank; any other line is a triple, fields verbatim
    assert got == [Triple(*row) for row in rows if sep.join(row).strip()]


def test_error_names_file_line_and_text_across_blocks(tmp_path: Path, monkeypatch) -> None:
    lines = [f"e{i}\tr\te{i + 1}" for i in range(5000)]
    lines[3210] = "e3210\tr"  # line 3211
    path = tmp_path / "kg.txt"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(base, "BLOCK_BYTES", 4096)
    with pytest.raises(InputError) as err:
        list(DelimitedTriples((path,)))
    assert (err.value.path, err.value.line, err.value.text) == (str(path), 3211, "e3210\tr")
    assert f"{path}:3211:" in str(err.value) and "'e3210\\tr'" in str(err.value)


@pytest.mark.parametrize(
    ("line", "reason"),
    [("a\tb", "expected 3 fields"), ("a\tb\tc\td", "expected 3 fields"), ("a\t\tc", "empty field"),
     ("\tb\tc", "empty field")],
)
def test_malformed_lines(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "kg.txt"
    path.write_text(f"x\ty\tz\n{line}\nx\ty\tw\n")
    with pytest.raises(InputError, match=reason) as err:
        list(DelimitedTriples((path,)))
    assert err.value.line == 2 and err.value.text == line


def test_invalid_utf8_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "kg.txt"
    path.write_bytes(b"a\tb\tc\nd\te\t\xff\xfe\n")
    with pytest.raises(InputError, match="invalid UTF-8") as err:
        list(DelimitedTriples((path,)))
    assert err.value.line == 2


def test_bom_and_missing_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "kg.txt"
    path.write_bytes(b"\xef\xbb\xbfa\tb\tc\r\nd\te\tf")
    assert list(DelimitedTriples((path,))) == [Triple("a", "b", "c"), Triple("d", "e", "f")]


# ---- Family, BRINK ------------------------------------------------------------------------------
def test_family_bundled_equals_shared_copy(datasets_dir: Path) -> None:
    bundled = read_dataset("family")
    shared = read_dataset("family", datasets_dir / "family")
    for split in ("facts", "train", "valid", "test"):
        got = list(read_dataset("family", splits=[split]).triples)
        assert got == raw_triples(datasets_dir / "family" / f"{split}.txt")
    assert list(bundled.triples) == list(shared.triples)
    facts = list(read_dataset("family", splits=["facts"]).triples)
    assert len(facts) == len(set(facts)) == 17_615
    assert len({t.relation for t in facts}) == 12


def test_brink_release_equals_family_facts(datasets_dir: Path) -> None:
    brink = list(read_dataset("brink", datasets_dir / "brink-family").triples)
    # independent: strip the quotes and the _of suffix by hand
    raw = {Triple(h.strip('"'), r.removesuffix("_of"), t.strip('"'))
           for h, r, t in raw_triples(datasets_dir / "brink-family" / "facts.tsv")}
    assert set(brink) == raw == set(raw_triples(datasets_dir / "family" / "facts.txt"))
    assert len(brink) == 17_615
    kept = read_dataset("brink", datasets_dir / "brink-family" / "facts.tsv", strip_of="false")
    assert {t.relation for t in kept.triples} == {r + "_of" for r in {t.relation for t in brink}}


# ---- FB15k-237 ----------------------------------------------------------------------------------
FB15K_SPLITS = {"train": 272_115, "valid": 17_535, "test": 20_466}


@pytest.mark.slow
def test_fb15k237_splits_entities_relations(datasets_dir: Path) -> None:
    directory = datasets_dir / "fb15k-237"
    everything: list[Triple] = []
    for split, documented in FB15K_SPLITS.items():
        got = list(read_dataset("fb15k-237", directory, [split]).triples)
        assert got == raw_triples(directory / f"{split}.txt")
        assert len(got) == documented
        assert not any("\r" in t.tail for t in got)  # CRLF stripped
        everything += got
    assert list(read_dataset("fb15k-237", directory).triples) == everything
    assert len({t.head for t in everything} | {t.tail for t in everything}) == 14_541
    assert len({t.relation for t in everything}) == 237


def test_fb15k237_labels_prefer_entity2text(datasets_dir: Path, tmp_path: Path) -> None:
    directory = datasets_dir / "fb15k-237"
    labels = dict(read_dataset("fb15k-237", directory).labels)
    lines = (directory / "entity2text.txt").read_text(encoding="utf-8").split("\n")
    assert labels == dict(line.split("\t", 1) for line in lines if line)
    assert labels["/m/0c94fn"] == "Gary Rydstrom"
    # without entity2text.txt: FB15k_mid2name.txt, underscores read as spaces
    for name in ("train.txt", "valid.txt", "test.txt", "FB15k_mid2name.txt"):
        (tmp_path / name).symlink_to(directory / name)
    fallback = dict(read_dataset("fb15k-237", tmp_path).labels)
    assert fallback["/m/0c94fn"] == "Gary Rydstrom" and len(fallback) == 14_951
    assert dict(read_dataset("fb15k-237", tmp_path, labels="no").labels) == {}
    assert len(read_dataset("fb15k-237", directory).relation_labels) == 237


# ---- MetaQA -------------------------------------------------------------------------------------
def test_metaqa_kb(datasets_dir: Path) -> None:
    kb = datasets_dir / "metaqa" / "kb_reconstructed.txt"
    data = read_dataset("metaqa", datasets_dir / "metaqa")
    triples = list(data.triples)
    assert triples == raw_triples(kb, "|")
    assert len(set(triples)) == 130_471
    assert len({t.relation for t in triples}) == 9
    labels = dict(data.labels)
    assert labels == {e: e for t in triples for e in (t.head, t.tail)}
    assert any(not e.isascii() for e in labels) and any(" " in e for e in labels)


def test_metaqa_bad_pipe_line(tmp_path: Path) -> None:
    (tmp_path / "kb.txt").write_text("A|directed_by|B\nMovie|x|y|z\n")
    with pytest.raises(InputError, match="expected 3 fields separated by '|'") as err:
        list(read_dataset("metaqa", tmp_path).triples)
    assert (err.value.line, err.value.text) == (2, "Movie|x|y|z")


QA_LINES = {(1, "dev"): 9_992, (1, "test"): 9_947, (2, "dev"): 14_872, (2, "test"): 14_872,
            (3, "dev"): 14_274, (3, "test"): 14_274}


@pytest.mark.parametrize(("hops", "split"), sorted(QA_LINES))
def test_metaqa_questions(datasets_dir: Path, hops: int, split: str) -> None:
    path = datasets_dir / "metaqa" / f"{hops}-hop" / f"qa_{split}.txt"
    questions = list(read_questions(path))
    raw = path.read_text(encoding="utf-8").split("\n")[:-1]
    qtypes = (path.parent / f"qa_{split}_qtype.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(questions) == len(raw) == len(qtypes) == QA_LINES[(hops, split)]
    for q, line, qtype in zip(questions, raw, qtypes, strict=True):
        text, answers = line.split("\t")
        assert q.text == text and q.hops == hops and q.qtype == qtype
        assert q.answers == tuple(answers.split("|"))
        assert f"[{q.topic}]" in text and "[" not in q.plain_text
        assert q.plain_text == text.replace(f"[{q.topic}]", q.topic)


def test_metaqa_question_examples(datasets_dir: Path) -> None:
    first = next(read_questions(datasets_dir / "metaqa" / "1-hop" / "qa_test.txt"))
    assert first == MetaQAQuestion("what does [Grégoire Colin] appear in", "Grégoire Colin",
                                   ("Before the Rain",), 1, "actor_to_movie", first.source, 1)
    two = load_questions(datasets_dir / "metaqa", "test", hops=[2])
    assert two[0].answers == ("Nancy Meyers", "Sam Mendes", "George Clooney", "Ken Kwapis", "Luke Greenfield")
    assert {q.hops for q in two} == {2}


def test_parse_question_errors() -> None:
    q = parse_question("who directed [Le Samouraï]\tJean-Pierre Melville", hops=1)
    assert (q.topic, q.answers) == ("Le Samouraï", ("Jean-Pierre Melville",))
    for bad, reason in [("no topic\tx", "one \\[topic entity\\]"), ("[a] and [b]\tx", "found 2"),
                        ("[a]\tx||y", "empty answer"), ("[a] x", "got 1 fields")]:
        with pytest.raises(InputError, match=reason):
            parse_question(bad, hops=1, source="f", number=3)


# ---- Wikidata5m (format on small files) -------------------------------------------------------
def test_wikidata5m_format(tmp_path: Path) -> None:
    files = write_wikidata5m(tmp_path / "wikidata5m_transductive", tmp_path / "wikidata5m_alias")
    for root in (tmp_path, tmp_path / "wikidata5m_transductive"):
        data = read_dataset("wikidata5m", root)
        assert list(data.triples) == [Triple(*line.split("\t")) for s in files.values() for line in s]
        assert dict(data.labels) == {"Q1": "Douglas Adams", "Q5": "human", "Q2": "Zaphod",
                                     "Q99": "not in the KG", "Q3": "Łódź"}
        assert data.relation_labels == {"P31": "instance of", "P22": "father"}
    valid = read_dataset("wikidata5m", tmp_path, ["valid"])
    assert list(valid.triples) == [Triple("Q3", "P40", "Q1")] and valid.splits == ("valid",)


def test_wikidata5m_alias_errors(tmp_path: Path) -> None:
    write_wikidata5m(tmp_path)
    (tmp_path / "wikidata5m_entity.txt").write_text("Q1\tDouglas Adams\nQ2\n")
    with pytest.raises(InputError, match="id<TAB>name") as err:
        list(read_dataset("wikidata5m", tmp_path).labels)
    assert (err.value.line, err.value.text) == (2, "Q2")


# ---- tsv, rdf, registry ------------------------------------------------------------------------
def test_tsv_file_and_directory(tmp_path: Path) -> None:
    (tmp_path / "kg").mkdir()
    (tmp_path / "kg" / "a.tsv").write_text("x\tr\ty\n")
    (tmp_path / "kg" / "b.txt").write_text("y\tr\tz\n")
    data = read_dataset("tsv", tmp_path / "kg")
    assert list(data.triples) == [Triple("x", "r", "y"), Triple("y", "r", "z")]
    assert data.graph_name == "kg"
    assert list(read_dataset("tsv", tmp_path / "kg", ["b"]).triples) == [Triple("y", "r", "z")]
    (tmp_path / "my kg.csv").write_text("x,y,likes\n")
    csv = read_dataset("tsv", tmp_path / "my kg.csv", separator="comma", order="htr")
    assert list(csv.triples) == [Triple("x", "likes", "y")] and csv.graph_name == "my-kg"


def test_rdf_ids_literals_and_labels(tmp_path: Path) -> None:
    path = tmp_path / "kg.ttl"
    path.write_text(
        "@prefix ex: <http://example.org/> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        "ex:alice ex:knows ex:bob ; rdfs:label \"Alice\"@en ; ex:age 42 .\n"
        "<http://kgengine.org/e/Grand%20Central> <http://kgengine.org/r/near> _:b1 .\n"
    )
    data = read_dataset("rdf", path)
    triples = list(data.triples)
    assert triples == [Triple("http://example.org/alice", "http://example.org/knows", "http://example.org/bob"),
                       Triple("Grand Central", "near", "_:b1")]
    assert data.triples.warnings() == [  # type: ignore[attr-defined]
        "skipped 1 literal-valued triple(s) (option literals=entities keeps them)"]
    assert dict(data.labels) == {"http://example.org/alice": "Alice"}
    kept = list(read_dataset("rdf", path, literals="entities").triples)
    assert Triple("http://example.org/alice", "http://example.org/age", "42") in kept


def test_rdf_syntax_error_names_line(tmp_path: Path) -> None:
    path = tmp_path / "kg.nt"
    path.write_text("<http://a> <http://b> <http://c> .\n<http://a> <http://b> oops .\n")
    with pytest.raises(InputError) as err:
        list(read_dataset("rdf", path).triples)
    assert (err.value.line, err.value.text) == (2, "<http://a> <http://b> oops .")


def test_paths_splits_and_options_fail_clearly(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("KGENGINE_DATA", raising=False)
    assert set(LOADERS) == {"family", "fb15k-237", "wikidata5m", "metaqa", "brink", "tsv", "rdf"}
    with pytest.raises(KGEngineError, match="needs --path"):
        read_dataset("fb15k-237")
    monkeypatch.setenv("KGENGINE_DATA", str(tmp_path))
    write_wikidata5m(tmp_path / "wikidata5m")
    assert len(list(read_dataset("wikidata5m").triples)) == 6  # found under $KGENGINE_DATA
    with pytest.raises(KGEngineError, match=re.escape("unknown split(s) dev")):
        read_dataset("family", splits=["dev"])
    (tmp_path / "wikidata5m" / "wikidata5m_transductive_test.txt").unlink()
    with pytest.raises(KGEngineError, match="wikidata5m_transductive_test.txt does not exist"):
        read_dataset("wikidata5m")
    with pytest.raises(KGEngineError, match="has no option colour"):
        read_dataset("family", colour="red")
    with pytest.raises(KGEngineError, match="unknown dataset 'yago'"):
        read_dataset("yago")


def test_names_file_transform(tmp_path: Path) -> None:
    path = tmp_path / "names.txt"
    path.write_text("/m/1\tGary_Rydstrom\n/m/2\tA_B\textra")
    assert list(NamesFile((path,), transform=lambda s: s.replace("_", " "))) == [
        ("/m/1", "Gary Rydstrom"), ("/m/2", "A B")]
    assert Counter(k for k, _ in NamesFile((path,))) == {"/m/1": 1, "/m/2": 1}
