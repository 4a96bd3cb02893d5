"""Everyday CLI safety (issue 11, items 1 and 4): commands that only read never create a
store; locations that are not stores are refused with a message that says why; output
paths are checked before any work; a user error is one line, a bug shows its traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from helpers.cli import run_cli as cli

TINY = "a\tr\tb\nb\tr\tc\nc\tr\ta\na\ts\tc\n"


def failed_cleanly(result: Result) -> bool:
    """A non-zero exit with a one-line message: the command raised a user error, which the
    CLI turned into ``SystemExit`` (anything else would be a traceback)."""
    clean_exit = isinstance(result.exception, SystemExit)
    return result.exit_code != 0 and clean_exit and "Traceback" not in result.output


@pytest.fixture
def tiny_store(tmp_path: Path) -> Path:
    kg = tmp_path / "kg.tsv"
    kg.write_text(TINY)
    store = tmp_path / "store"
    result = cli("load", "tsv", "--path", str(kg), "--store", str(store), "--graph", "tiny")
    assert result.exit_code == 0, result.output
    return store


def _files(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


# ---- item 1: reading commands never create a store ------------------------------------------------
READING = {
    "graphs": ["graphs"],
    "stats": ["stats"],
    "query": ["query", "ASK { ?s ?p ?o }"],
    "mine": ["mine"],
    "groundings": ["groundings", "r(?a,?b) => s(?a,?b)"],
    "drop": ["drop", "tiny", "--yes"],
    "brink build": ["brink", "build", "--graph", "tiny", "-o", "{out}"],
    "serve": ["serve", "--port", "0"],
}


@pytest.mark.parametrize("command", sorted(READING))
def test_reading_commands_never_create_a_store(command: str, tmp_path: Path) -> None:
    typo = tmp_path / "no-such-store"
    args = [a.replace("{out}", str(tmp_path / "out")) for a in READING[command]]
    result = cli(*args, "--store", str(typo))
    assert failed_cleanly(result), result.output
    assert f"no kgengine store at {typo}" in result.output and "kgengine load" in result.output
    assert not typo.exists()


@pytest.mark.parametrize("command", ["graphs", "stats", "load"])
def test_an_unrelated_directory_is_never_written_to(command: str, tmp_path: Path) -> None:
    unrelated = tmp_path / "photos"
    unrelated.mkdir()
    (unrelated / "holiday.jpg").write_bytes(b"\xff\xd8 not a store")
    before = _files(unrelated)
    args = ["load", "family"] if command == "load" else [command]
    result = cli(*args, "--store", str(unrelated))
    assert failed_cleanly(result), result.output
    expected = "holds no kgengine store" if command == "load" else f"no kgengine store at {unrelated}"
    assert expected in result.output
    assert _files(unrelated) == before  # no RocksDB files written there


def test_a_file_is_not_a_store_directory(tmp_path: Path) -> None:
    file = tmp_path / "kg.tsv"
    file.write_text(TINY)
    for args in (["graphs"], ["load", "family"]):
        result = cli(*args, "--store", str(file))
        assert failed_cleanly(result), result.output
        assert f"{file} is a file, not a store directory" in result.output
        assert "Errno" not in result.output
    assert file.read_text() == TINY


@pytest.mark.parametrize("command", [["graphs"], ["load", "family"], ["serve"]])
def test_an_unsupported_uri_scheme_is_refused(command: list[str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli(*command, "--store", "http://127.0.0.1:7878")
    assert failed_cleanly(result), result.output
    assert "unsupported store URI scheme 'http'" in result.output
    assert "neo4j" in result.output and "bolt" in result.output  # the schemes there are
    assert list(tmp_path.iterdir()) == []  # no folder 'http:' made in the working directory


def test_the_default_store_is_not_created_by_a_bare_graphs(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGENGINE_STORE", raising=False)
    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    result = cli("graphs")
    assert failed_cleanly(result), result.output
    assert "no kgengine store at" in result.output
    assert not (tmp_path / "data").exists()
    # and `load` still creates it where the default says
    assert cli("load", "family").exit_code == 0
    assert (tmp_path / "data" / "kgengine" / "store" / "CURRENT").is_file()
    assert "family" in cli("graphs").output


def test_load_creates_a_new_or_empty_directory_and_reads_then_work(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for location in (tmp_path / "new" / "store", empty):
        assert cli("load", "family", "--store", str(location)).exit_code == 0
        stats = cli("stats", "--store", str(location), "--graph", "family", "--json")
        assert stats.exit_code == 0 and '"triples": 28356' in stats.output


# ---- item 4: outputs checked before work; user errors vs bugs ----------------------------------
def test_mine_checks_its_outputs_before_mining(tiny_store: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from kgengine.mining import search

    def no_mining(*args: object, **kwargs: object) -> None:
        raise AssertionError("mining started before the outputs were checked")

    monkeypatch.setattr(search.Miner, "mine", no_mining)
    missing = tmp_path / "missing" / "dir"
    for option in ("-o", "--json"):
        result = cli("mine", "--store", str(tiny_store), option, str(missing / "rules.tsv"))
        assert failed_cleanly(result), result.output
        assert f"the folder {missing} does not exist" in result.output
    result = cli("mine", "--store", str(tiny_store), "-o", str(tmp_path))
    assert failed_cleanly(result) and "is a directory" in result.output


def test_brink_build_checks_its_output_folder_before_building(tiny_store: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import kgengine.commands.brink as brink_command

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("the build started before the output folder was checked")

    monkeypatch.setattr(brink_command, "build_brink", no_build)
    monkeypatch.setattr(brink_command, "mine_rules", no_build)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder")
    result = cli("brink", "build", "--store", str(tiny_store), "--graph", "tiny", "-o", str(a_file / "out"))
    assert failed_cleanly(result), result.output
    assert f"{a_file} is a file, not a folder" in result.output


def test_a_bug_shows_its_traceback_not_a_one_line_message(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    import kgengine.commands.kg as kg_command

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("an internal inconsistency")

    monkeypatch.setattr(kg_command, "read_dataset", broken)
    result = cli("load", "family", "--store", str(tmp_path / "store"))
    assert result.exit_code != 0
    assert isinstance(result.exception, ValueError)  # not turned into "Error: ..." and exit 1


def test_bad_parameter_values_are_user_errors(tmp_path: Path) -> None:
    result = cli("load", "family", "--store", str(tmp_path / "store"), "--graph", "bad name!")
    assert failed_cleanly(result) and "invalid graph name 'bad name!'" in result.output
    kg = tmp_path / "kg.tsv"
    kg.write_text(TINY)
    result = cli("load", "tsv", "--path", str(kg), "--store", str(tmp_path / "store"), "-o", "separator=ab")
    assert failed_cleanly(result) and "separator must be one character" in result.output


def test_unreadable_inputs_name_the_file(tiny_store: Path, tmp_path: Path) -> None:
    binary = tmp_path / "rules.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00 not text")
    result = cli("brink", "build", "--store", str(tiny_store), "--graph", "tiny", "--rules", str(binary),
                 "-o", str(tmp_path / "out"))
    assert failed_cleanly(result) and f"rules file {binary} is not UTF-8 text" in result.output
    rules = tmp_path / "rules.txt"
    rules.write_text("r(?a,?b) => s(?a,?b)\n")
    result = cli("brink", "build", "--store", str(tiny_store), "--graph", "tiny", "--rules", str(rules),
                 "--relation-labels", str(binary), "-o", str(tmp_path / "out"))
    assert failed_cleanly(result) and f"cannot read relation labels {binary}" in result.output
