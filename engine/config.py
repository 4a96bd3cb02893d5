"""Where settings come from: command-line option > environment variable > config file > default.

Config file: ``$KGENGINE_CONFIG`` or ``<user config dir>/kgengine/config.toml``, e.g.::

    store = "/data/kgengine"          # or "neo4j://localhost:7687"
    cache = "/data/kgengine-cache"    # kgengine.artifacts.cache_root ($KGENGINE_CACHE wins)
    [neo4j]
    user = "neo4j"
    password = "secret"
    database = "neo4j"
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import platformdirs
from kgengine.errors import KGEngineError


def config_path() -> Path:
    env = os.environ.get("KGENGINE_CONFIG")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir("kgengine")) / "config.toml"


@cache
def _load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise KGEngineError(f"{path}: invalid TOML: {exc}") from exc


def config() -> dict[str, Any]:
    return _load(config_path())


def setting(key: str, env: str | None = None, default: Any = None) -> Any:
    """A dotted key such as ``neo4j.user`` from the environment or the config file."""
    if env and os.environ.get(env):
        return os.environ[env]
    node: Any = config()
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def default_store_dir() -> str:
    return str(Path(platformdirs.user_data_dir("kgengine")) / "store")


def resolve_store(option: str | None) -> str:
    """The store location: a directory (Oxigraph) or a neo4j:// / bolt:// URI."""
    if option:
        return option
    return str(setting("store", "KGENGINE_STORE", default_store_dir()))
