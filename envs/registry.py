"""The runtimes by name: the built-in ones, those registered with :func:`register_runtime`, and those of the
``litmus_replay.runtimes`` entry-point group (loaded on first use)."""

from __future__ import annotations

import threading
from typing import Any

from .errors import EnvError
from .inprocess import InProcessRuntime
from .interface import Runtime
from .plugins import PluginGroup
from .runtimes.docker import DockerRuntime
from .runtimes.sandbox import SandboxRuntime

ENTRY_POINT_GROUP = "litmus_replay.runtimes"


class UnknownRuntime(EnvError, LookupError):
    """No runtime has this name; when the plug-in of that name failed to load, the message says why."""

    def __init__(self, name: str, valid: list[str], failure: str | None = None):
        self.name = name
        self.valid = sorted(valid)
        self.failure = failure
        super().__init__(failure or f"unknown runtime {name!r}; choose one of: {', '.join(self.valid)}")


_RUNTIMES: dict[str, type[Runtime]] = {cls.name: cls for cls in (InProcessRuntime, SandboxRuntime, DockerRuntime)}
_LOAD_LOCK = threading.RLock()
_PLUGINS = PluginGroup(ENTRY_POINT_GROUP, "runtime")  # importing a plug-in's module registers its runtime


def register_runtime(cls: type[Runtime]) -> type[Runtime]:
    """Class decorator: make a runtime available by its ``name``."""
    with _LOAD_LOCK:
        _RUNTIMES[cls.name] = cls
    return cls


def runtime_names() -> list[str]:
    _PLUGINS.load()
    with _LOAD_LOCK:
        return sorted(_RUNTIMES)


def unknown_runtime(name: str) -> UnknownRuntime:
    """The error for a runtime name nobody registered: its plug-in's failure when that is why."""
    return UnknownRuntime(name, runtime_names(), failure=_PLUGINS.explain(name))


def get_runtime(name: str, **options: Any) -> Runtime:
    """Instantiate a runtime by name; raises :class:`UnknownRuntime` listing the valid names."""
    if name not in runtime_names():
        raise unknown_runtime(name)
    return _RUNTIMES[name](**options)


__all__ = ["ENTRY_POINT_GROUP", "UnknownRuntime", "get_runtime", "register_runtime", "runtime_names", "unknown_runtime"]
