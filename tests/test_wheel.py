"""Packaging: the wheel holds every module, query file, prompt and bundled dataset of the
source folders, and the installed product runs from a fresh virtual environment holding
only the wheel and its declared runtime dependencies.

How the fresh environment is made (fast and offline, yet honest): ``python -m venv`` with no
system site-packages; the wheel installed into it with ``--no-deps``; and the declared
runtime dependencies (the wheel's ``Requires-Dist`` without extras, with their own
requirements, transitively) made visible through one ``.pth`` line naming a folder of
symlinks to exactly those distributions' files in the test's own environment. Nothing else
of that environment is visible (no editable kgengine, no test or extra libraries), so a
missing file in the wheel or an undeclared runtime import fails here."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
DATA_SUFFIXES = (".rq", ".cypher", ".txt", ".tsv", ".md")
# runtime dependencies the product never imports by name: uvicorn loads them when present
LOADED_BY_OTHERS = {"httptools": "uvicorn's C HTTP parser", "uvloop": "uvicorn's event loop"}


def source_files() -> dict[str, Path]:
    """Wheel path (``kgengine/...``) -> source file, for every module and data file."""
    out = {}
    for package, folder in PACKAGE_DIR.items():
        root = REPO / folder
        for path in root.rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or path.suffix in DATA_SUFFIXES:
                relative = path.relative_to(root).as_posix()
                out[package.replace(".", "/") + "/" + relative] = path
    return out


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level import name -> source files importing it, over the whole product."""
    found: dict[str, set[str]] = {}
    for wheel_path, path in source_files().items():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "kgengine" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(wheel_path)
    return found


def _dist_name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def test_runtime_dependencies_are_what_the_product_imports() -> None:
    """Every third-party import is declared (runtime or an extra), and every runtime
    dependency is imported by the product (or loaded by one that is)."""
    runtime = {_dist_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = {name: {_dist_name(r) for r in reqs}
              for name, reqs in PYPROJECT["project"]["optional-dependencies"].items()}
    providers = {module: {d.lower().replace("_", "-") for d in dists}
                 for module, dists in metadata.packages_distributions().items()}
    imported: set[str] = set()
    for module, files in _third_party_imports().items():
        dists = providers.get(module)
        assert dists, f"{module} (imported by {sorted(files)}) is installed by no distribution"
        declared = dists & (runtime | set().union(*(v for k, v in extras.items() if k != "dev")))
        assert declared, f"{module} (imported by {sorted(files)}) is not a declared dependency"
        imported |= declared
    unused = runtime - imported - set(LOADED_BY_OTHERS)
    assert not unused, f"runtime dependencies the product never imports (move them to dev): {sorted(unused)}"
    assert not (extras["dev"] & runtime), "a dev-only library is also a runtime dependency"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the source folders (the checkout stays untouched)
    with this environment's setuptools (no download)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in PACKAGE_DIR.values():
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
         "-w", str(out), str(source)], capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "Warning" not in built.stdout + built.stderr, built.stdout + built.stderr  # a quiet build
    (wheel_file,) = out.glob("kgengine-*.whl")
    return wheel_file


@pytest.mark.slow
def test_wheel_holds_every_module_query_prompt_and_dataset(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = source_files()
    missing = sorted(set(expected) - names)
    assert not missing, f"missing from the wheel: {missing}"
    # the kinds of file that must be there, each at least once (a glob that matched nothing
    # would otherwise pass unseen)
    for pattern in ("kgengine/sparql/edges_out.rq", "kgengine/cypher/edges_out.cypher",
                    "kgengine/cypher/store/schema.cypher", "kgengine/data/family/facts.txt",
                    "kgengine/brink/data/family_amie3_len3.tsv", "kgengine/loaders/family.py",
                    "kgengine/commands/brink.py", "kgengine/commands/serve.py"):
        assert pattern in names, pattern
    prompts = sorted((REPO / "engine" / "llm" / "prompts").glob("*.txt"))
    assert prompts and all(f"kgengine/llm/prompts/{p.name}" in names for p in prompts)
    for package in ("llm", "rag", "eval"):
        assert f"kgengine/{package}/__init__.py" in names, package
    # nothing from outside the product
    assert not [n for n in names if n.startswith(("tests/", "bench/", "scripts/")) or "__pycache__" in n]


def _requirements_closure(requirements: list[str]) -> set[str]:
    """Distribution names of the requirements and of what they require, transitively, as
    installed here; extras-only requirements are left out, environment markers evaluated."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        todo += [Requirement(r) for r in metadata.distribution(name).requires or []]
    return seen


def _dependency_view(requirements: list[str], view: Path) -> None:
    """Symlinks to the top-level files and folders of exactly these distributions."""
    view.mkdir()
    for name in sorted(_requirements_closure(requirements)):
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            target = Path(str(dist.locate_file(top)))
            if target.exists() and not (view / top).exists():
                (view / top).symlink_to(target)


@pytest.mark.slow
def test_product_runs_from_a_fresh_venv_with_only_the_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
         "--quiet", str(wheel)], capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    dist_info = next((venv / "lib").glob("python*/site-packages/kgengine-*.dist-info"))
    requires = metadata.Distribution.at(dist_info).requires or []
    _dependency_view(requires, tmp_path / "deps")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "kgengine-deps.pth").write_text(str(tmp_path / "deps") + "\n")
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp_path),
           "KGENGINE_CONFIG": str(tmp_path / "no-config.toml"), "LANG": "C.UTF-8"}

    def run(*args: str) -> str:
        done = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    # the installed copy, not the checkout, and its query files and prompts are all there
    probe = run(str(python), "-c", "import json, kgengine, kgengine.queries as q; from importlib import "
                "resources; print(json.dumps([kgengine.__file__, q.query_names('sparql'), "
                "q.query_names('cypher'), sorted(p.name for p in resources.files('kgengine.llm.prompts')"
                ".iterdir() if p.name.endswith('.txt'))]))")
    location, sparql, cypher, prompts = json.loads(probe)
    assert Path(location).is_relative_to(venv), location
    assert sparql == sorted(p.stem for p in (REPO / "sparql").glob("*.rq"))
    assert cypher == sorted(p.stem for p in (REPO / "cypher").glob("*.cypher"))
    assert prompts == sorted(p.name for p in (REPO / "engine" / "llm" / "prompts").glob("*.txt"))
    assert not Path(sysconfig.get_paths()["purelib"]).is_relative_to(venv)  # two environments

    kgengine = str(venv / "bin" / "kgengine")
    assert "load" in run(kgengine, "--help") and "brink" in run(kgengine, "--help")
    store = str(tmp_path / "store")
    assert "28,356 triples" in run(kgengine, "load", "family", "--store", store)
    stats = json.loads(run(kgengine, "stats", "--store", store, "--graph", "family", "--json"))
    assert stats["family"]["triples"] == 28_356 and stats["family"]["relations"] == 12
