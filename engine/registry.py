"""One registry type for every kind of extension (commands, store backends, dataset loaders,
answering methods, question-set readers): names resolved to objects, in three ways —

- built-ins, each a lazy ``"module:attribute"`` reference, imported only when that name is
  used (listing names imports nothing);
- installed packages, through the entry-point group ``kgengine.<kind>``, scanned once per
  process (a built-in's name cannot be taken);
- registration at run time (:meth:`Registry.register`), for this process only (tests, a
  Python user's own extension).

What a name loads is checked against the kind (``accepts``). A plugin that fails to import or
loads the wrong thing is one :class:`KGEngineError` line naming the entry point and its group,
never a traceback; an unknown name lists the valid ones."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Generic, TypeGuard, TypeVar

from kgengine.errors import KGEngineError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

T = TypeVar("T")

def instance_of(cls: type[T]) -> Callable[[object], TypeGuard[T]]:
    """``accepts`` for a kind whose entries are instances of ``cls``."""

    def accepts(obj: object) -> TypeGuard[T]:
        return isinstance(obj, cls)

    return accepts


def load_reference(reference: str) -> object:
    """The object a ``"module:attribute"`` reference names (the attribute may be dotted)."""
    module_name, _, attribute = reference.partition(":")
    found: object = import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    return found


class Registry(Generic[T]):
    """Names of one kind of extension -> the objects they stand for (see the module doc).

    ``kind`` is how errors name one entry ("method", "dataset", ...); ``group`` the entry-point
    group; ``builtins`` ``name -> "module:attribute"`` in the order :meth:`names` lists them;
    ``accepts`` tells whether a loaded object is of the kind, described by ``expected``."""

    def __init__(self, kind: str, group: str, builtins: Mapping[str, str], *,
                 accepts: Callable[[object], TypeGuard[T]], expected: str) -> None:
        self.kind = kind
        self.group = group
        self.builtins: dict[str, str] = dict(builtins)
        self._accepts = accepts
        self.expected = expected
        self._registered: dict[str, T] = {}
        self._loaded: dict[str, T] = {}
        self._plugins: dict[str, EntryPoint] | None = None

    # ---- listing ---------------------------------------------------------------------------------
    def plugins(self) -> dict[str, EntryPoint]:
        """The installed packages' entry points of this group (read once per process), less
        those that would shadow a built-in."""
        if self._plugins is None:
            from importlib.metadata import entry_points  # 70 ms: only once a name is asked for

            found = sorted(entry_points(group=self.group), key=lambda ep: ep.name)
            self._plugins = {ep.name: ep for ep in found if ep.name not in self.builtins}
        return self._plugins

    def names(self) -> list[str]:
        """Every name: built-ins in their order, then plugins by name, then run-time ones."""
        return list(dict.fromkeys([*self.builtins, *self.plugins(), *self._registered]))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.builtins or name in self._registered
                                          or name in self.plugins())

    def __iter__(self) -> Iterator[str]:
        """:meth:`names` lazily: the entry points are scanned only once the built-ins are passed
        (finding a store's backend by its location never scans them for a directory)."""
        yield from self.builtins
        yield from self.plugins()  # (they never shadow a built-in)
        yield from (name for name in self._registered
                    if name not in self.builtins and name not in self.plugins())

    def __len__(self) -> int:
        return len(self.names())

    def where(self, name: str) -> str:
        """Where ``name`` comes from, as errors say it."""
        if name in self._registered:
            return "registered at run time"
        if name in self.builtins:
            return f"built in: {self.builtins[name]}"
        if name in self.plugins():
            return f"entry point {name} = {self.plugins()[name].value!r} in group {self.group}"
        return "not registered"

    # ---- resolving -------------------------------------------------------------------------------
    def get(self, name: str) -> T:
        """The object registered as ``name``, imported on first use."""
        if name in self._registered:
            return self._registered[name]
        if name in self._loaded:
            return self._loaded[name]
        if name in self.builtins:
            found = load_reference(self.builtins[name])  # a built-in that fails to import is a bug
        elif name in self.plugins():
            try:
                found = self.plugins()[name].load()
            except Exception as exc:  # a broken plugin: say which, never a traceback
                raise KGEngineError(f"{self.kind} {name!r} ({self.where(name)}) failed to load: "
                                    f"{type(exc).__name__}: {exc}") from None
        else:
            raise KGEngineError(f"unknown {self.kind} {name!r} (choose from {', '.join(self.names())})")
        if not self._accepts(found):
            raise KGEngineError(f"{self.kind} {name!r} ({self.where(name)}): {found!r} is not "
                                f"{self.expected}")
        self._loaded[name] = found
        return found

    def items(self) -> Iterator[tuple[str, T]]:
        """Every name with its object, imported as the iteration reaches it."""
        for name in self:
            yield name, self.get(name)

    # ---- run-time registration -------------------------------------------------------------------
    def register(self, name: str, obj: T) -> None:
        """Add ``name`` for this process (a package adds one for good with an entry point)."""
        if name in self.builtins:
            raise KGEngineError(f"{self.kind} {name!r} is built in")
        if not self._accepts(obj):
            raise KGEngineError(f"{self.kind} {name!r}: {obj!r} is not {self.expected}")
        self._registered[name] = obj

    def unregister(self, name: str) -> None:
        """Remove a name :meth:`register` added (built-ins and plugins stay)."""
        self._registered.pop(name, None)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.group!r}, {self.names()!r})"
