"""Which domains have a call space: the built-in ones, those registered with :func:`register_space`, and
those a distribution names in the ``litmus_replay.fidelity`` entry-point group (a :class:`CallSpace`)."""

from __future__ import annotations

from litmus_replay.envs.plugins import PluginGroup

from ..errors import UnknownName
from .domains import BUILTIN_SPACES
from .space import CallSpace

__all__ = ["ENTRY_POINT_GROUP", "get_space", "register_space", "space_names"]

ENTRY_POINT_GROUP = "litmus_replay.fidelity"

_SPACES: dict[str, CallSpace] = {space.domain: space for space in BUILTIN_SPACES}


def register_space(space: CallSpace) -> CallSpace:
    """Make a call space available to ``litmus-replay fidelity`` under its domain's name."""
    _SPACES[space.domain] = space
    return space


def _accept(name: str, loaded: object) -> None:
    if not isinstance(loaded, CallSpace):
        raise TypeError(f"the entry point names a {type(loaded).__name__}, not a CallSpace")
    register_space(loaded)


_PLUGINS = PluginGroup(ENTRY_POINT_GROUP, "fidelity space", accept=_accept)


def space_names() -> list[str]:
    _PLUGINS.load()
    return sorted(_SPACES)


def get_space(domain: str) -> CallSpace:
    """The call space for a domain; raises :class:`UnknownName` listing the domains that have one (or saying
    why the plug-in of that name failed to load)."""
    _PLUGINS.load()
    if domain not in _SPACES:
        raise UnknownName("fidelity domain", domain, space_names(), failure=_PLUGINS.explain(domain))
    return _SPACES[domain]
