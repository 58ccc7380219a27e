"""Which domains have a call space: the built-in ones, those registered with :func:`register_space`, and
those a distribution names in the ``litmus_replay.fidelity`` entry-point group (a :class:`CallSpace`)."""

from __future__ import annotations

from importlib import metadata

from ..errors import UnknownName
from .domains import BUILTIN_SPACES
from .space import CallSpace

__all__ = ["ENTRY_POINT_GROUP", "get_space", "register_space", "space_names"]

ENTRY_POINT_GROUP = "litmus_replay.fidelity"

_SPACES: dict[str, CallSpace] = {}
_entry_points_loaded = False


def register_space(space: CallSpace) -> CallSpace:
    """Make a call space available to ``litmus-replay fidelity`` under its domain's name."""
    _SPACES[space.domain] = space
    return space


def space_names() -> list[str]:
    _load()
    return sorted(_SPACES)


def get_space(domain: str) -> CallSpace:
    """The call space for a domain; raises :class:`UnknownName` listing the domains that have one."""
    _load()
    if domain not in _SPACES:
        raise UnknownName("fidelity domain", domain, space_names())
    return _SPACES[domain]


def _load() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for space in BUILTIN_SPACES:
        _SPACES.setdefault(space.domain, space)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        loaded = entry.load()
        if isinstance(loaded, CallSpace):
            register_space(loaded)
