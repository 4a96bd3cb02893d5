"""Where the shared real data lives, for the tests and the benchmarks (one lookup):
``$KGENGINE_SHARED``, else ``shared/`` beside the repository (``../shared``).

The benchmarks import it too (``bench/*.py`` put ``tests/`` on ``sys.path``)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    env = os.environ.get("KGENGINE_SHARED")
    return Path(env) if env else REPO.parent / "shared"


SHARED = shared_dir()
DATASETS = SHARED / "datasets"
REFERENCE = SHARED / "reference"
