"""Named mining settings: the one home of each preset the other packages use."""

from __future__ import annotations

from dataclasses import replace

from kgengine.mining.io import MinedRule
from kgengine.mining.search import MiningOptions, counting_engine, mine
from kgengine.store import KGStore

# BRINK's AMIE 3 thresholds (the paper §5.1 and the official code): the build's rules and the
# answerers' rules mined on first use
BRINK_MINING = MiningOptions(min_conf=0.3, min_pca=0.4, min_hc=0.1)


def mine_brink_rules(store: KGStore, graph: str, max_len: int, threads: int = 1) -> list[MinedRule]:
    """Mine ``graph`` as ``kgengine brink build`` does without ``--rules``: BRINK's settings on
    the in-memory matrix engine (its rules and the answerers' rules mined on first use)."""
    options = replace(BRINK_MINING, max_len=max_len, threads=threads)
    return mine(counting_engine(store, graph, "matrix"), options)
