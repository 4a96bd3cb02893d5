"""Package discovery for kgengine's folder layout; everything else is in pyproject.toml.

The import package ``kgengine`` is assembled from several folders (``[tool.setuptools]
package-dir`` in pyproject.toml: engine/ -> kgengine, loaders/ -> kgengine.loaders, ...).
setuptools' own discovery cannot prefix the packages it finds under a mapped folder, so it is
done here: every folder under a mapped root is a package (a namespace package where it has no
``__init__.py``: data folders such as ``llm/prompts``), and pyproject.toml's package-data
globs ship their files. A new subpackage, query file or prompt file is in the wheel without
editing any list (tests/test_wheel.py checks it)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).resolve().parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
    "tool"]["setuptools"]["package-dir"]


def packages() -> list[str]:
    found = []
    for name, folder in PACKAGE_DIR.items():
        found.append(name)
        # a mapped root nested in another (none today) would be found twice: skip it
        nested = {other.removeprefix(name + ".") for other in PACKAGE_DIR if other.startswith(name + ".")}
        for sub in find_namespace_packages(str(ROOT / folder), exclude=["*__pycache__*"]):
            if sub.split(".")[0] not in nested:
                found.append(f"{name}.{sub}")
    return found


setup(packages=packages())
