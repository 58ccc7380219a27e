"""Where worlds run, in one import: the interface (:mod:`.interface`), the registry (:mod:`.registry`) and
the in-process runtime (:mod:`.inprocess`).

A runtime opens worlds; a world handle answers JSON call requests with JSON outcomes, whether it lives in
this process, in a Linux-namespace sandbox or in a container. Runtimes register with
:func:`register_runtime` and can be added through the ``litmus_replay.runtimes`` entry-point group.
"""

from __future__ import annotations

from .inprocess import InProcessRuntime, InProcessWorld
from .interface import PendingWorld, Runtime, WorldHandle, open_ahead
from .registry import (ENTRY_POINT_GROUP, UnknownRuntime, get_runtime, register_runtime, runtime_names,
                       unknown_runtime)

__all__ = [
    "ENTRY_POINT_GROUP",
    "InProcessRuntime",
    "InProcessWorld",
    "PendingWorld",
    "Runtime",
    "UnknownRuntime",
    "WorldHandle",
    "get_runtime",
    "open_ahead",
    "register_runtime",
    "runtime_names",
    "unknown_runtime",
]
