"""The runtime extension point: where a world runs.

A runtime opens worlds; a world handle answers JSON call requests with JSON outcomes, whether it lives in
this process, in a Linux-namespace sandbox or in a container. Runtimes register with
:func:`register_runtime` and can be added through the ``litmus_replay.runtimes`` entry-point group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
import threading
from importlib import metadata
from typing import Any, ClassVar, Mapping

from .domain import Semantics
from .errors import EnvError
from .world import World

ENTRY_POINT_GROUP = "litmus_replay.runtimes"


class UnknownRuntime(EnvError, LookupError):
    def __init__(self, name: str, valid: list[str]):
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown runtime {name!r}; choose one of: {', '.join(self.valid)}")


class WorldHandle(ABC):
    """One open world in some runtime."""

    @abstractmethod
    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Apply one call request and return the outcome dict."""

    @abstractmethod
    def snapshot(self) -> dict[str, str]:
        """The world's observable state, keyed by resource id."""

    @abstractmethod
    def close(self) -> None:
        """Tear the world down; the handle is unusable afterwards."""

    def __enter__(self) -> "WorldHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Runtime(ABC):
    """Where worlds run. Subclasses set ``name`` and implement :meth:`open_world`."""

    name: ClassVar[str]

    @abstractmethod
    def open_world(self, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
        """Build a fresh world from its spec, in the given semantics."""

    def close(self) -> None:
        """Release what the runtime holds (pools, daemons)."""

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_RUNTIMES: dict[str, type[Runtime]] = {}
_entry_points_loaded = False
_LOAD_LOCK = threading.RLock()


def register_runtime(cls: type[Runtime]) -> type[Runtime]:
    _RUNTIMES[cls.name] = cls
    return cls


def runtime_names() -> list[str]:
    global _entry_points_loaded
    with _LOAD_LOCK:  # threads (a Dask worker's) must not see the registry half loaded
        if not _entry_points_loaded:
            from . import runtimes  # noqa: F401  (registers sandbox, and docker; neither imports a heavy module)
            for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
                entry.load()
            _entry_points_loaded = True
    return sorted(_RUNTIMES)


def get_runtime(name: str, **options: Any) -> Runtime:
    """Instantiate a runtime by name; raises :class:`UnknownRuntime` listing the valid names."""
    if name not in runtime_names():
        raise UnknownRuntime(name, runtime_names())
    return _RUNTIMES[name](**options)


class InProcessWorld(WorldHandle):
    def __init__(self, world: World):
        self.world = world

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return self.world.call(request)

    def snapshot(self) -> dict[str, str]:
        return self.world.snapshot()

    def close(self) -> None:
        self.world.close()


@register_runtime
class InProcessRuntime(Runtime):
    """Worlds in this process: for stub semantics and tests. Real file semantics stay inside the world's
    root by resolving every path as if chrooted there; nothing else is isolated."""

    name = "inprocess"

    def open_world(self, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
        return InProcessWorld(World(spec, semantics))
