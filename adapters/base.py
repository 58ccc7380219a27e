"""The adapter extension point: one class per foreign format, registered by name.

Adapters can be added through the ``litmus_replay.adapters`` entry-point group. Every failure to read a
file is an :class:`AdapterError` naming the file and the field.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from importlib import metadata
from pathlib import Path
from typing import ClassVar

from litmus_replay.replay.errors import UnknownName
from litmus_replay.replay.model import Trajectory

ENTRY_POINT_GROUP = "litmus_replay.adapters"


class Adapter(ABC):
    """Reads one foreign trajectory format."""

    name: ClassVar[str]

    @abstractmethod
    def load(self, path: Path) -> list[Trajectory]:
        """Every trajectory in the file, in file order."""


_ADAPTERS: dict[str, type[Adapter]] = {}
_entry_points_loaded = False


def register_adapter(cls: type[Adapter]) -> type[Adapter]:
    _ADAPTERS[cls.name] = cls
    return cls


def adapter_names() -> list[str]:
    global _entry_points_loaded
    if not _entry_points_loaded:
        _entry_points_loaded = True
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            entry.load()
    return sorted(_ADAPTERS)


def get_adapter(name: str) -> Adapter:
    """The adapter registered under ``name``; raises :class:`UnknownName` listing the valid ones."""
    if name not in adapter_names():
        raise UnknownName("format", name, adapter_names())
    return _ADAPTERS[name]()


def load_trajectories(path: str | Path, format: str = "native") -> list[Trajectory]:
    return get_adapter(format).load(Path(path))
