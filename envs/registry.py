"""The runtimes by name: the built-in ones, those registered with :func:`register_runtime`, and those of the
``litmus_replay.runtimes`` entry-point group (loaded on first use)."""

from __future__ import annotations

import threading
from importlib import metadata
from typing import Any

from .errors import EnvError
from .inprocess import InProcessRuntime
from .interface import Runtime
from .runtimes.docker import DockerRuntime
from .runtimes.sandbox import SandboxRuntime

ENTRY_POINT_GROUP = "litmus_replay.runtimes"


class UnknownRuntime(EnvError, LookupError):
    def __init__(self, name: str, valid: list[str]):
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown runtime {name!r}; choose one of: {', '.join(self.valid)}")


_RUNTIMES: dict[str, type[Runtime]] = {cls.name: cls for cls in (InProcessRuntime, SandboxRuntime, DockerRuntime)}
_entry_points_loaded = False
_LOAD_LOCK = threading.RLock()


def register_runtime(cls: type[Runtime]) -> type[Runtime]:
    """Class decorator: make a runtime available by its ``name``."""
    with _LOAD_LOCK:
        _RUNTIMES[cls.name] = cls
    return cls


def runtime_names() -> list[str]:
    global _entry_points_loaded
    with _LOAD_LOCK:  # threads (a Dask worker's) must not see the registry half loaded
        if not _entry_points_loaded:
            for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
                entry.load()
            _entry_points_loaded = True
    return sorted(_RUNTIMES)


def get_runtime(name: str, **options: Any) -> Runtime:
    """Instantiate a runtime by name; raises :class:`UnknownRuntime` listing the valid names."""
    if name not in runtime_names():
        raise UnknownRuntime(name, runtime_names())
    return _RUNTIMES[name](**options)


__all__ = ["ENTRY_POINT_GROUP", "UnknownRuntime", "get_runtime", "register_runtime", "runtime_names"]
