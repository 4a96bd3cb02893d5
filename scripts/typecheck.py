"""Type-check kgengine with mypy (the settings are pyproject.toml's ``[tool.mypy]``).

The import package ``kgengine`` is assembled from several folders (pyproject.toml's
``package-dir``: engine/, loaders/, sparql/, cypher/), and the editable install maps them
with an import hook that mypy cannot follow. So this script lays the package out as it is
installed — a tree of symbolic links under build/typecheck/kgengine — runs mypy on it and on
bench/ (linked too, bench/neo4j.py under another name: it would shadow the driver), and
writes every reported path back as the repository path, so an error names
``engine/rag/base.py:12``, not the link.

Usage: python scripts/typecheck.py [mypy options]   (exit status: mypy's)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"
# installed package (as a path) -> repository folder: pyproject.toml's package-dir
FOLDERS = {package.replace(".", "/"): folder for package, folder in tomllib.loads(
    (ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"].items()}


# benchmark scripts whose file name is a library's (run as scripts, they never import it as
# themselves); mypy sees them under another name: bench/neo4j.py would shadow the driver
RENAMED_SCRIPTS = {"neo4j.py": "neo4j_benchmark.py"}


def lay_out() -> dict[str, str]:
    """Links for every .py file of the package and of bench/; returns link prefix ->
    repository prefix."""
    shutil.rmtree(TREE, ignore_errors=True)
    back: dict[str, str] = {}
    for package, folder in FOLDERS.items():
        source = ROOT / folder
        for path in source.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            link = TREE / package / path.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(path, link)
        back[str((TREE / package).relative_to(ROOT)) + "/"] = folder + "/"
    (TREE / "bench").mkdir(parents=True)
    for path in sorted((ROOT / "bench").glob("*.py")):
        name = RENAMED_SCRIPTS.get(path.name, path.name)
        os.symlink(path, TREE / "bench" / name)
        back[f"{(TREE / 'bench' / name).relative_to(ROOT)}:"] = f"bench/{path.name}:"
    return back


def main(argv: list[str]) -> int:
    back = lay_out()
    # longest prefix first: kgengine/loaders/ before kgengine/
    prefixes = sorted(back, key=len, reverse=True)
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               str((TREE / "kgengine").relative_to(ROOT)), str((TREE / "bench").relative_to(ROOT)), *argv]
    # bench/ (its scripts import each other) and tests/ (the benchmarks import its shared-data
    # lookup, synthetic graphs and Neo4j launcher)
    search_path = os.pathsep.join((str(TREE), str(TREE / "bench"), str(ROOT / "tests")))
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "MYPYPATH": search_path})
    for line in (result.stdout + result.stderr).splitlines():
        for prefix in prefixes:
            if line.startswith(prefix):
                line = back[prefix] + line[len(prefix):]
                break
        print(line)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
