"""How entities are written — one home for the surface forms every part shares (BRINK's
build, prompts and answers, evaluation): a store's seeded ``private`` ids (BRINK §5.4), the
``dataset``'s own ids, or ``text`` labels (the dataset id where an entity has none)."""

from __future__ import annotations

from enum import StrEnum

from kgengine.errors import KGEngineError


class Surface(StrEnum):
    PRIVATE = "private"
    DATASET = "dataset"
    TEXT = "text"


# earlier builds (stats.json) and the BRINK command spelled dataset ids "id"
_ALIASES = {"id": Surface.DATASET}


class SurfaceFormError(KGEngineError):
    pass


def parse_surface(value: str | Surface) -> Surface:
    if isinstance(value, str) and value in _ALIASES:
        return _ALIASES[value]
    try:
        return Surface(value)
    except ValueError:
        choices = "|".join(s.value for s in Surface)
        raise SurfaceFormError(f"unknown surface form {value!r} (labels: use {choices})") from None


SURFACE_CHOICES = tuple(s.value for s in Surface)
