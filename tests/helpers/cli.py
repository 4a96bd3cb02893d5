"""Running the kgengine command line in tests: in-process (click's runner) or as the installed
``kgengine`` script in a real process, and reading what it printed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from kgengine.cli import main

KGENGINE = str(Path(sys.executable).parent / "kgengine")  # the installed entry point


def run_cli(*args: str, env: Mapping[str, str | None] | None = None, input: str | None = None,
            catch_exceptions: bool = True) -> Result:
    """The CLI run in-process; the result whatever the exit code."""
    return CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=catch_exceptions)


def run_cli_raising(*args: str) -> Result:
    """The CLI run in-process; an exception other than the exit (a bug) propagates."""
    return run_cli(*args, catch_exceptions=False)


def kgengine(*args: str) -> str:
    """Run the CLI in-process; it must succeed. Returns stdout and stderr."""
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    return result.output


def run_parts(*args: str, env: Mapping[str, str | None] | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of an in-process run; a bug (an exception other than the
    exit) is raised, with its traceback."""
    result = run_cli(*args, env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def json_output(result: Result) -> Any:
    """What a ``--format json`` / ``--json`` run printed on stdout (stderr may warn)."""
    return json.loads(result.stdout)


def run_process(store: Path, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """The installed ``kgengine`` in its own process, on ``store`` (``--store`` last)."""
    return subprocess.run([KGENGINE, *args, "--store", str(store)], capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The one-line error a failed run printed (never a traceback)."""
    assert result.returncode == 1, result.stdout
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "\n" not in message and "Traceback" not in message
    return message
