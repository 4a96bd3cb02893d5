"""kgengine: a graph-database-backed reasoning engine for knowledge graphs."""

from kgengine.model import Direction, GraphInfo, GraphStats, Triple
from kgengine.store import KGStore, open_store

__version__ = "0.1.0"
__all__ = ["Direction", "GraphInfo", "GraphStats", "KGStore", "Triple", "open_store", "__version__"]
