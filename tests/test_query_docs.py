"""Every `kgengine query` example of docs/serve.md ("Writing queries by hand") runs as shown
on the real datasets it names and finds something, with no warning."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from kgengine.cli import main as cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "serve.md"
pytestmark = pytest.mark.slow


def documented_commands() -> list[tuple[list[str], str | None]]:
    """(arguments after `kgengine`, stdin) of each example in the doc's examples block."""
    text = DOC.read_text()
    block = text.split("Examples (each runs as shown", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands, pending = [], ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        pending = ""
        stdin = None
        if words[0] == "echo":
            bar = words.index("|")
            stdin, words = " ".join(words[1:bar]), words[bar + 1:]
        if ">" in words:
            words = words[:words.index(">")]
        if "-f" in words:  # reads a file of the reader's
            continue
        assert words[:2] == ["kgengine", "query"], words
        commands.append((words[1:], stdin))
    return commands


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, datasets_dir: Path) -> Path:
    location = tmp_path_factory.mktemp("docs") / "store"
    for args in (["family"], ["fb15k-237", "--path", str(datasets_dir / "fb15k-237")],
                 ["metaqa", "--path", str(datasets_dir / "metaqa")],
                 ["brink", "--path", str(datasets_dir / "brink-family")]):
        result = CliRunner().invoke(cli, ["load", *args, "--store", str(location)])
        assert result.exit_code == 0, result.output
    return location


def test_the_examples_are_found() -> None:
    graphs = {words[words.index("--graph") + 1] for words, _ in documented_commands() if "--graph" in words}
    assert graphs == {"family", "fb15k-237", "metaqa", "brink"}


@pytest.mark.parametrize("words,stdin", documented_commands(), ids=lambda v: re.sub(r"\s+", " ", str(v))[:60])
def test_a_documented_example_runs_and_finds_something(store: Path, words: list[str],
                                                       stdin: str | None) -> None:
    result = CliRunner().invoke(cli, [*words, "--store", str(store)], input=stdin)
    assert result.exit_code == 0, result.output
    assert not result.stderr, result.stderr  # no "does not occur in the store" warning
    out = result.stdout.strip()
    assert out and out != "false" and "0 row(s)" not in out and out.splitlines()[-1] != "0"
    if "--format" in words and words[words.index("--format") + 1] in ("csv", "tsv"):
        assert len(out.splitlines()) > 1  # a header and at least one row
